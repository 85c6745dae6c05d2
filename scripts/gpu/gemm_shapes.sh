# Sourced by the GPU scripts that bench GEMMs against cuBLAS: square products and LeNet's dense layers with their
# gradients (fc1 100x256x3136, fc2 100x10x256 at batch 100; the backward products at batch 64), as `bench` options.
GEMMS=(--gemm M=1024,N=1024,K=1024 --gemm M=2048,N=2048,K=2048 --gemm M=4096,N=4096,K=4096
       --gemm M=100,N=256,K=3136,trans_b=1 --gemm M=100,N=10,K=256,trans_b=1 --gemm M=64,N=256,K=3136,trans_b=1
       --gemm M=256,N=3136,K=64,trans_a=1 --gemm M=64,N=3136,K=256 --gemm M=10,N=256,K=64,trans_a=1)
