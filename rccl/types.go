package rccl

/*
#include "helpers.h"
*/
import "C"

import (
	"unsafe"

	"github.com/rocm-go/rocm/hip"
)

// Element is a Go type with an NCCL data type: what DataTypeOf maps.
type Element interface {
	int8 | uint8 | int32 | uint32 | int64 | uint64 | hip.Half | hip.BFloat16 | float32 | float64
}

// DataTypeOf is the data type of the Go element type T: DataTypeInt8 for
// int8, DataTypeFloat16 for hip.Half, DataTypeBfloat16 for hip.BFloat16,
// DataTypeFloat32 for float32, and so on.
func DataTypeOf[T Element]() DataType {
	var z T
	switch any(z).(type) {
	case int8:
		return DataTypeInt8
	case uint8:
		return DataTypeUint8
	case int32:
		return DataTypeInt32
	case uint32:
		return DataTypeUint32
	case int64:
		return DataTypeInt64
	case uint64:
		return DataTypeUint64
	case hip.Half:
		return DataTypeFloat16
	case hip.BFloat16:
		return DataTypeBfloat16
	case float32:
		return DataTypeFloat32
	}
	return DataTypeFloat64
}

// Size is the size of one element in bytes; 0 for a value that is not a
// data type.
func (t DataType) Size() int {
	switch t {
	case DataTypeInt8, DataTypeUint8, DataTypeFloat8e4m3, DataTypeFloat8e5m2:
		return 1
	case DataTypeFloat16, DataTypeBfloat16:
		return 2
	case DataTypeInt32, DataTypeUint32, DataTypeFloat32:
		return 4
	case DataTypeInt64, DataTypeUint64, DataTypeFloat64:
		return 8
	}
	return 0
}

// valid reports whether the op is one of NCCL's built-in reductions.
func (o Op) valid() bool { return o <= OpAvg }

// UniqueIDBytes is the size of a UniqueID (NCCL_UNIQUE_ID_BYTES).
const UniqueIDBytes = 128

// UniqueID names a communicator to its ranks: one rank makes it with
// GetUniqueID and hands its bytes to the others (over a socket, a file, an
// environment variable), and every rank passes it to CommInitRank. Its
// bytes are opaque; on NCCL and RCCL they hold the address of a socket the
// first rank listens on.
type UniqueID [UniqueIDBytes]byte

// GetUniqueID makes the ID of a new communicator (ncclGetUniqueId). RCCL
// 7.2 initializes HIP first and fails with ErrUnhandledCudaError on a
// machine without a GPU.
func GetUniqueID() (UniqueID, error) {
	var id UniqueID
	if err := ensure(); err != nil {
		return id, err
	}
	var c C.ncclUniqueId
	if err := check("ncclGetUniqueId", C.rg_ncclGetUniqueId(&c)); err != nil {
		return id, err
	}
	copy(id[:], unsafe.Slice((*byte)(unsafe.Pointer(&c)), UniqueIDBytes))
	return id, nil
}

// Bytes is a copy of the ID's bytes, to send to the other ranks.
func (id UniqueID) Bytes() []byte { return append([]byte(nil), id[:]...) }

// UniqueIDFromBytes reads an ID another rank sent: exactly UniqueIDBytes
// bytes.
func UniqueIDFromBytes(b []byte) (UniqueID, error) {
	var id UniqueID
	if len(b) != UniqueIDBytes {
		return id, invalid("UniqueIDFromBytes", "%d bytes: a unique ID has %d", len(b), UniqueIDBytes)
	}
	copy(id[:], b)
	return id, nil
}

// c is the ID as the C calls take it.
func (id *UniqueID) c() C.ncclUniqueId { return C.rg_rccl_id(unsafe.Pointer(&id[0])) }
