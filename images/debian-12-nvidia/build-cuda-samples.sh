# Build step of debian-12-nvidia, run in the image's root (chroot) after
# every package is installed: compiles three of NVIDIA's CUDA samples from
# Debian's nvidia-cuda-samples 11.8 (unpacked into /usr/local/src/cuda-samples)
# with the image's own nvcc 11.8 (nvidia-cuda-toolkit) and g++-11, for the
# GPU generations ingot's recipes name (sm_70 V100, sm_75 T4, sm_80 A100,
# sm_86 A10/A40, sm_89 L4/L40S, sm_90 H100/H200), and installs them in
# /usr/local/bin for the burn-in:
#   bandwidthTest            host-to-device, device-to-host, device-to-device bandwidth of one GPU
#   p2pBandwidthLatencyTest  the bandwidth and latency matrices between every pair of GPUs
#   matrixMulCUBLAS          an SGEMM through cuBLAS whose result it compares with the CPU's (PASS/FAIL)
# nvcc needs no GPU to compile. It names its temporary files after its PID
# and that name ends up in the binary: the build runs each step in a PID
# namespace of its own, and make runs one job at a time here, so the PIDs,
# and the bytes, are the same in every build (44 s on 2 cores).
samples=/usr/local/src/cuda-samples/usr/share/doc/nvidia-cuda-toolkit/examples/Samples
for d in 1_Utilities/bandwidthTest 5_Domain_Specific/p2pBandwidthLatencyTest 4_CUDA_Libraries/matrixMulCUBLAS; do
	name=${d##*/}
	make -C "$samples/$d" CUDA_PATH=/usr HOST_COMPILER=g++-11 SMS="70 75 80 86 89 90" -j1
	install -m 0755 "$samples/$d/$name" "/usr/local/bin/$name"
done
