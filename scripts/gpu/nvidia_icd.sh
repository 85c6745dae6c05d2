# Sourced by the GPU scripts: NVIDIA's OpenCL driver is installed on the GPU machine but may not be registered
# with the ICD loader; register it for this process tree when no vendor is.
if [ -z "$(ls /etc/OpenCL/vendors 2>/dev/null)" ] && [ -z "${OCL_ICD_VENDORS:-}" ]; then
  mkdir -p /tmp/icd && echo libnvidia-opencl.so.1 >/tmp/icd/nvidia.icd && export OCL_ICD_VENDORS=/tmp/icd
fi
