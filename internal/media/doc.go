// Package media fetches virtual media images for the machine model: an
// image cache (machine.ImageFetcher) that downloads http and https images
// into a directory qemu can read, keeps one file per content (named by its
// SHA-256), reuses a URL's copy only when the server proves the bytes
// are the same (a strong ETag through If-None-Match, or exact
// Last-Modified and length on HEAD; never If-Modified-Since), and evicts the
// least recently used images that no machine holds when a size bound would
// be exceeded. Local paths are used in place, and only inside a directory
// the operator allows. For a UEFI HTTP boot (ImageRequest.EFIArch) a
// downloaded UEFI application is kept as the ISO that boots it (package
// efiboot), under its own key, so the same URL inserted as a CD image is
// still checked as an ISO. A request with a Source (a machine's own BMC
// address) is fetched from that address, so it reaches only what that
// address's network routes to; a fetch without a route says so.
//
// What it does not do: attach images to machines (machine.Service and the
// backends do), or speak Redfish.
package media
