package rccl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/rocm-go/rocm/errs"
	"github.com/rocm-go/rocm/hip"
)

// Tier 0, pure Go: the data types, ops, versions, IDs and errors, with no
// library loaded.

func TestDataTypeOf(t *testing.T) {
	for _, c := range []struct {
		got  DataType
		want DataType
		size int
		name string
	}{
		{DataTypeOf[int8](), DataTypeInt8, 1, "ncclInt8"},
		{DataTypeOf[uint8](), DataTypeUint8, 1, "ncclUint8"},
		{DataTypeOf[int32](), DataTypeInt32, 4, "ncclInt32"},
		{DataTypeOf[uint32](), DataTypeUint32, 4, "ncclUint32"},
		{DataTypeOf[int64](), DataTypeInt64, 8, "ncclInt64"},
		{DataTypeOf[uint64](), DataTypeUint64, 8, "ncclUint64"},
		{DataTypeOf[hip.Half](), DataTypeFloat16, 2, "ncclFloat16"},
		{DataTypeOf[hip.BFloat16](), DataTypeBfloat16, 2, "ncclBfloat16"},
		{DataTypeOf[float32](), DataTypeFloat32, 4, "ncclFloat32"},
		{DataTypeOf[float64](), DataTypeFloat64, 8, "ncclFloat64"},
	} {
		assert.Equal(t, c.want, c.got, c.name)
		assert.Equal(t, c.size, c.got.Size(), c.name)
		assert.Equal(t, c.name, c.got.String())
	}
	// NCCL's aliases are the same values, named by their first name.
	assert.Equal(t, DataTypeInt8, DataTypeChar)
	assert.Equal(t, DataTypeInt32, DataTypeInt)
	assert.Equal(t, DataTypeFloat16, DataTypeHalf)
	assert.Equal(t, DataTypeFloat32, DataTypeFloat)
	assert.Equal(t, DataTypeFloat64, DataTypeDouble)
	assert.Equal(t, 1, DataTypeFloat8e4m3.Size())
	assert.Equal(t, 0, DataType(12).Size(), "ncclNumTypes is no data type")
	assert.Equal(t, "DataType(12)", DataType(12).String())
	assert.Len(t, dataTypeValues, 12)
}

func TestOps(t *testing.T) {
	names := map[Op]string{OpSum: "ncclSum", OpProd: "ncclProd", OpMax: "ncclMax", OpMin: "ncclMin", OpAvg: "ncclAvg"}
	for o, name := range names {
		assert.True(t, o.valid(), name)
		assert.Equal(t, name, o.String())
	}
	assert.Equal(t, []Op{OpSum, OpProd, OpMax, OpMin, OpAvg}, opValues, "the counts and bounds of ncclRedOp_t are left out")
	assert.False(t, Op(5).valid(), "ncclNumOps")
	assert.False(t, Op(0x7fffffff).valid(), "ncclMaxRedOp")
}

func TestDecodeVersion(t *testing.T) {
	assert.Equal(t, hip.Version{Major: 2, Minor: 27, Patch: 7, Raw: 22707}, decodeVersion(22707), "RCCL 7.2.4")
	assert.Equal(t, hip.Version{Major: 2, Minor: 13, Patch: 4, Raw: 21304}, decodeVersion(21304), "RCCL 5.4.3")
	assert.Equal(t, hip.Version{Major: 2, Minor: 8, Patch: 4, Raw: 2804}, decodeVersion(2804), "the code before 2.9")
	assert.Equal(t, "2.27.7", decodeVersion(22707).String())
}

func TestUniqueIDBytes(t *testing.T) {
	var id UniqueID
	for i := range id {
		id[i] = byte(i * 7)
	}
	b := id.Bytes()
	require.Len(t, b, UniqueIDBytes)
	b[0] = 99
	assert.Equal(t, byte(0), id[0], "Bytes is a copy")
	back, err := UniqueIDFromBytes(id.Bytes())
	require.NoError(t, err)
	assert.Equal(t, id, back)
	for _, n := range []int{0, 127, 129} {
		_, err := UniqueIDFromBytes(make([]byte, n))
		assert.ErrorIs(t, err, ErrInvalidArgument, "%d bytes", n)
	}
	_, err = UniqueIDFromBytes(make([]byte, 3))
	assert.EqualError(t, err, "rccl: UniqueIDFromBytes: ncclInvalidArgument (Invalid argument): 3 bytes: a unique ID has 128")
}

func TestErrors(t *testing.T) {
	err := statusError("ncclAllReduce", StatusRemoteError)
	assert.EqualError(t, err, "rccl: ncclAllReduce: ncclRemoteError (Remote process exited or there was a network error)")
	assert.ErrorIs(t, err, ErrRemoteError)
	assert.NotErrorIs(t, err, ErrInvalidUsage)
	var e *Error
	require.True(t, errors.As(err, &e))
	assert.Equal(t, StatusRemoteError, e.Status)

	closed := closedError("Comm.AllReduce")
	assert.ErrorIs(t, closed, ErrClosed)
	assert.ErrorIs(t, closed, ErrInvalidUsage)
	assert.ErrorIs(t, closed, errs.ErrClosed, "the kind every package above the bindings gives a closed handle")
	assert.Equal(t, errs.ErrClosed, errs.KindOf(closed))
	assert.Equal(t, errs.ErrDevice, errs.KindOf(err), "other failures are the device's")

	assert.NoError(t, check("ncclAllReduce", uint32(StatusSuccess)))
	assert.ErrorIs(t, check("ncclGroupEnd", uint32(StatusInvalidUsage)), ErrInvalidUsage)
	for _, s := range statusValues {
		assert.NotEmpty(t, s.Description(), s)
	}
	assert.NotContains(t, statusValues, Status(8), "ncclNumResults is no status")
}

// Every call refuses a nil communicator before loading anything.
func TestNilComm(t *testing.T) {
	var m *Comm
	_, err := m.Count()
	assert.ErrorIs(t, err, ErrInvalidArgument)
	assert.ErrorContains(t, err, "nil communicator")
	assert.ErrorIs(t, m.AllReduce(nil, nil, 1, DataTypeFloat32, OpSum, nil), ErrInvalidArgument)
	assert.NoError(t, m.Close(), "closing a nil communicator does nothing")
	assert.NoError(t, m.Abort())
	assert.Nil(t, m.Device())
	assert.NoError(t, CloseAll(nil, nil))
}
