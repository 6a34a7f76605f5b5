package hip

/*
#include "helpers.h"
*/
import "C"

// CanAccessPeer reports whether the device can read and write peer's
// memory directly once EnablePeerAccess has been called.
func (d *Device) CanAccessPeer(peer *Device) (bool, error) {
	if err := ensure(); err != nil {
		return false, err
	}
	if peer == nil {
		return false, invalid("Device.CanAccessPeer", "nil peer")
	}
	var v C.int
	if err := check("hipDeviceCanAccessPeer", C.rg_hipDeviceCanAccessPeer(&v, d.c(), peer.c())); err != nil {
		return false, err
	}
	return v != 0, nil
}

// EnablePeerAccess lets kernels and copies on the device use peer's memory
// directly.
func (d *Device) EnablePeerAccess(peer *Device) error {
	if err := ensure(); err != nil {
		return err
	}
	if peer == nil || peer.ordinal == d.ordinal {
		return invalid("Device.EnablePeerAccess", "the peer must be another device")
	}
	return check("hipDeviceEnablePeerAccess", C.rg_hipDeviceEnablePeerAccess_on(d.c(), peer.c(), 0))
}

// DisablePeerAccess undoes EnablePeerAccess.
func (d *Device) DisablePeerAccess(peer *Device) error {
	if err := ensure(); err != nil {
		return err
	}
	if peer == nil || peer.ordinal == d.ordinal {
		return invalid("Device.DisablePeerAccess", "the peer must be another device")
	}
	return check("hipDeviceDisablePeerAccess", C.rg_hipDeviceDisablePeerAccess_on(d.c(), peer.c()))
}
