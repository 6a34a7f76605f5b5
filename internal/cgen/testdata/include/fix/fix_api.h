/* A small library header for the generator's golden tests. It mimics the
 * constructs the ROCm headers use. */
#ifndef FIX_API_H
#define FIX_API_H

#include <stddef.h>
#include <stdint.h>

#ifndef FIX_PLATFORM
#error "define FIX_PLATFORM"
#endif

/** Status codes. */
typedef enum fixStatus_t {
    fixSuccess = 0,            ///< Everything worked.
    fixErrorInvalidValue = 1,  ///< A parameter was NULL
                               ///< or out of range.
    fixErrorOutOfMemory = 2,   ///< Out of memory.
    // Deprecated
    fixErrorMemoryAllocation = 2,
    fixErrorNotReady = 600,
    fixErrorUnknown = 999      /**< Something else. */
} fixStatus_t;

typedef enum {
    fix_mode_fast = 0,
    fix_mode_accurate = 1,
    fix_mode_log = 2,
} fix_mode;

typedef enum fixSigned { fixSignedMinus = -1, fixSignedZero = 0 } fixSigned;

typedef struct ifixStream_t* fixStream_t;
typedef void* fixDeviceptr_t;
typedef fixDeviceptr_t fixAddress_t;

typedef struct fixUUID_t {
    char bytes[16];
} fixUUID;

typedef struct {
    unsigned hasAtomics : 1;
    unsigned hasDoubles : 1;
    unsigned reserved : 30;
} fixArch_t;

typedef struct fixProps_t {
    char name[256];
    fixUUID uuid;
    size_t totalMem;
    int dims[3];
    fixArch_t arch;
    unsigned* flagsPtr;
    const char* label;
    double clock;
    uint64_t id;
} fixProps_t;

/** A find result with C11 anonymous members, like MIOpen's miopenConvAlgoPerf_t. */
typedef struct {
    union {
        fix_mode mode;
        fixSigned sign;
    };
    float time;
    struct {
        size_t lo;
        size_t hi;
    };
} fixPerf_t;

typedef void (*fixCallback_t)(fixStream_t stream, fixStatus_t status, void* user);

/** Portable memory. */
#define fixHostMallocDefault 0x0
#define fixHostMallocPortable 0x1  ///< Visible to all contexts.
// Mapped into the device's address space.
#define fixHostMallocMapped 0x2
#define fixHostMallocNuma (1u << 30)
#define fixHostMallocLike(x) (x)
#define fixHostMallocHandle ((fixStream_t)2)

fixStatus_t fixInit(unsigned flags);
fixStatus_t fixGetCount(int* count);
fixStatus_t fixSetDevice(int device);
fixStatus_t fixGetProps(fixProps_t* props, int device);
fixStatus_t fixMalloc(void** ptr, size_t size);
fixStatus_t fixMemcpy(void* dst, const void* src, size_t size, fixStream_t stream);
fixStatus_t fixAddCallback(fixStream_t stream, fixCallback_t cb, void* user, unsigned int flags);
fixStatus_t fixSetMode(fix_mode mode, fixSigned s, fixAddress_t where);
fixStatus_t fixLaunch(const void* const* args, char* const names[], int count);
const char* fixGetErrorName(fixStatus_t status);
void fixReset(void);
fixStatus_t fixFindPerf(fixPerf_t* results, int count);
int fixVersion(void);
fixStatus_t fixUnboundButDeclared(int);

#endif
