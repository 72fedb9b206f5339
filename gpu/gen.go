package gpu

// The PTX under kernels/ is generated from kernels/kernels.cu and
// kernels/decode.cu (a module of its own) and committed;
// regenerating it needs nvcc (CUDA 11.8 or newer):
//
//go:generate nvcc -ptx -O3 -arch=compute_80 -o kernels/kernels_sm80.ptx kernels/kernels.cu
//go:generate nvcc -ptx -O3 -arch=compute_90 -o kernels/kernels_sm90.ptx kernels/kernels.cu
//go:generate nvcc -ptx -O3 -arch=compute_80 -o kernels/decode_sm80.ptx kernels/decode.cu
//go:generate nvcc -ptx -O3 -arch=compute_90 -o kernels/decode_sm90.ptx kernels/decode.cu
