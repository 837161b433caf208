package virt

import (
	"errors"

	"github.com/digitalocean/go-libvirt"
)

// IsCode reports whether err is (or wraps) a libvirt error with that code.
// It is the one place libvirt's error numbers are read: the backend maps
// them to the model's sentinels (Backend.wrap), lab building to "not found
// is success" and the like.
func IsCode(err error, code libvirt.ErrorNumber) bool {
	var e libvirt.Error
	return errors.As(err, &e) && e.Code == uint32(code)
}

// UUIDString formats a libvirt UUID the way Redfish and libvirt's XML spell it.
func UUIDString(u libvirt.UUID) string { return uuidString(u) }
