// Package rccl is collective communication between GPUs: RCCL on AMD
// GPUs, and on NVIDIA GPUs NCCL, whose API RCCL keeps (RCCL's
// hipStream_t is NCCL's cudaStream_t), behind a thin C translation of the
// statuses.
//
// A communicator is a group of ranks, one per GPU; each rank is a Comm on
// its device. One process that drives several GPUs makes them all at once
// with CommInitAll; processes (or goroutines) that hold one GPU each join
// with CommInitRank, given the UniqueID that one of them made with
// GetUniqueID and sent to the others as bytes:
//
//	comms, err := rccl.CommInitAll(dev0, dev1)
//	defer rccl.CloseAll(comms...)
//	err = rccl.Group(func() error { // one goroutine, two GPUs: one group
//		for i, c := range comms {
//			if err := c.AllReduce(send[i], recv[i], n, rccl.DataTypeFloat32, rccl.OpSum, streams[i]); err != nil {
//				return err
//			}
//		}
//		return nil
//	})
//
// The collectives (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce)
// and the point-to-point Send and Recv take device buffers (hip.Buffer) of
// the communicator's device, a count of elements, a DataType (int8, uint8,
// int32, uint32, int64, uint64, f16, bf16, f32, f64; DataTypeOf maps Go
// types), an Op for reductions (sum, prod, max, min, avg) and a hip.Stream
// of the device, and are queued on that stream. Every argument is checked
// in Go before any C call; a refused call returns an *Error with
// StatusInvalidArgument (or StatusInvalidUsage for a closed communicator,
// whose cause is ErrClosed) and a detail naming the argument, a failed
// library call an *Error with the library's status. errors.Is matches
// them against ErrInvalidArgument and the other sentinels.
//
// Threads. NCCL's groups are per OS thread, and a collective for several
// GPUs from one thread must be inside a group, or the first rank's call
// would wait for the others: GroupStart locks the goroutine to its thread
// until GroupEnd, and Group wraps a function in both. A Comm's calls must
// come from one goroutine at a time, and all ranks must issue the same
// collectives in the same order; AsyncError and Abort may be called from
// any goroutine, to watch and to stop a communicator that hangs. The calls
// that run on a device make it current in the same C call, as every
// package of rocm-go does.
//
// Graphs. The collectives and Send/Recv may be captured into a HIP graph
// (hip.Stream.BeginCapture) and replayed: NCCL supports it since 2.9, and
// RCCL does too. The communicator must outlive the graphs that captured
// its work.
//
// The library is loaded with dlopen on first use (or by Load), following
// the platform package hip loaded: librccl.so.1 on AMD (from ROCM_PATH,
// /opt/rocm or the loader path; it must run on the HIP runtime package hip
// loaded, which Load checks), libnccl.so.2 on NVIDIA (from CUDA_PATH,
// CUDA_HOME, /usr/local/cuda or the loader path, where pip's nvidia-nccl
// wheel puts it). Version reports the NCCL API version: RCCL 7.2.4 reports
// 2.27.7.
//
// Debian carries RCCL 5.4.3 (NCCL 2.13.4's API, without ncclCommSplit) in
// sid, built for ROCm 5.7's HIP that sid can no longer install, and RCCL
// 7.2.4 (NCCL 2.27.7's API) in experimental, built for ROCm 7.2. The
// bindings are generated from and checked against the latter's rccl.h,
// and tier 1 loads its librccl.so.1 with ROCm 7.2's HIP runtime (see
// scripts/rocm-env.sh). RCCL 5.x lacks ncclCommSplit and
// ncclCommFinalize: on it Split and Finalize fail with ErrSymbolNotFound.
package rccl
