// Package efivars reads edk2 variable stores (the OVMF_VARS.fd images that
// OVMF keeps its UEFI variables in) and the EFI signature lists of the
// secure boot key databases (PK, KEK, db, dbx) inside them. It can also
// write a copy of a store with some variables marked deleted, as the
// firmware's own variable driver marks them.
//
// What it does not do: write new variables, reclaim space, or check
// authenticated variables' signatures. It is pure: no libvirt, no files
// beyond the one it is asked to read.
package efivars
