// The DLPack exchange structures as the DLPack specification lays them out (the unversioned export of DLPack 0.x
// and the versioned one of 1.x), declared here so the extension needs no other header.
#pragma once

#include <cstdint>

namespace convtune::python {

// DLDeviceType values convtune meets.
enum DLDeviceKind : int32_t {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // page-locked host memory: host memory to convtune
  kDLOpenCL = 4,
  kDLROCM = 10,
  kDLCUDAManaged = 13,
};

// DLDataTypeCode values.
enum DLTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};

struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

// DLPack 1.0's versioned export (asked for with __dlpack__(max_version=...)): it can say the memory is read-only.
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

inline constexpr uint64_t kDLFlagReadOnly = uint64_t{1} << 0;

// The capsule names of a fresh export, unversioned and versioned.
inline constexpr const char* kDLTensorCapsule = "dltensor";
inline constexpr const char* kDLTensorVersionedCapsule = "dltensor_versioned";

}  // namespace convtune::python
