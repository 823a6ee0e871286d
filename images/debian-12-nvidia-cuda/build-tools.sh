# Build step of debian-12-nvidia-cuda: the burn-in tools NVIDIA does not
# package, from their pinned tarballs (unpacked into /usr/local/src/NAME),
# compiled with the image's CUDA 12.2 (cuda-toolkit-12-2 in /usr/local/cuda-12.2)
# for sm_80 (A100), sm_89 (L40S) and sm_90 (H100/H200).
cuda=/usr/local/cuda-12.2
export PATH="$cuda/bin:$PATH"
src() { find "/usr/local/src/$1" -mindepth 1 -maxdepth 1 -type d | head -1; }
# nccl-tests: all_reduce_perf against libnccl2 (single process, every GPU).
make -C "$(src nccl-tests)" CUDA_HOME="$cuda" NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_90,code=sm_90" -j"$(nproc)"
install -m 0755 "$(src nccl-tests)/build/all_reduce_perf" /usr/local/bin/all_reduce_perf
# gpu-burn: gpu_burn and the compare.ptx it loads from its working directory.
make -C "$(src gpu-burn)" CUDAPATH="$cuda" COMPUTE=80
install -m 0755 "$(src gpu-burn)/gpu_burn" /usr/local/bin/gpu_burn
install -m 0644 "$(src gpu-burn)/compare.ptx" /usr/local/lib/compare.ptx
# nvbandwidth: CMake, Boost program_options (Debian's libboost-program-options-dev).
cmake -S "$(src nvbandwidth)" -B /tmp/nvbandwidth-build -DCMAKE_CUDA_COMPILER="$cuda/bin/nvcc" -DCMAKE_CUDA_ARCHITECTURES="80;89;90"
cmake --build /tmp/nvbandwidth-build -j"$(nproc)"
install -m 0755 /tmp/nvbandwidth-build/nvbandwidth /usr/local/bin/nvbandwidth
rm -rf /tmp/nvbandwidth-build
