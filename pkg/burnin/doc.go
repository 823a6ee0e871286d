// Package burnin parses the output of the burn-in and acceptance tools a
// freshly imaged GPU node runs at first boot, reads it into evidence
// (api.Evidence, Evidence) and has pkg/burnin/judge hold it against the
// recipe, so ingot can decide from the numbers whether the node may be sold
// ("ready"). Runner runs the tools; JudgeOutput is the same reading and
// judgement on a saved output (`ingot burnin judge`).
//
// Every parser is pure: bytes in, a typed result out, nothing executed.
// Each returns (Result, error); the error is a *ParseError naming the tool
// and the 1-based line, and wraps ErrIncomplete when the run did not finish,
// ErrToolFailed when the tool said it could not run, or ErrMiscompare when
// the tool found wrong data and stopped (a hardware verdict). No parser
// panics on any input. Parsers skip what is not theirs wherever it is (MPI
// notices, NCCL logs, driver warnings, stderr, text around JSON) and read
// numbers as printf writes them (%g, inf, -nan). Results carry SI units
// named in the field: BytesPerSec, BitsPerSec, Sec, Watts, Celsius.
// gpu-burn's GflopsPerSec (1e9 floating point operations per second) and
// stress-ng's bogo ops per second are the tools' own work units and have no
// SI equivalent.
//
// The tools and the command lines the parsers expect:
//
//   - gpu-burn (github.com/wilicc/gpu-burn): GEMM load on every GPU with a
//     result check. `gpu_burn 3600` (add -tc for tensor cores, -d for FP64);
//     stdout and stderr together. It always exits 0: ParseGPUBurn reads the
//     verdict from its "Tested N GPUs:" block. Rates are Gflop/s.
//   - DCGM diagnostics (NVIDIA Data Center GPU Manager): `dcgmi diag -r 3 -j`
//     for ParseDCGM (DCGM 2.x-4.x JSON); the table of `dcgmi diag -r 3` for
//     ParseDCGMText.
//   - nccl-tests (github.com/NVIDIA/nccl-tests):
//     `all_reduce_perf -b 1G -e 8G -f 2 -g 8` for ParseNCCL. The tool prints
//     GB/s meaning 1e9 bytes/s and times in microseconds.
//   - nvbandwidth (github.com/NVIDIA/nvbandwidth): `nvbandwidth` (all
//     testcases) or `nvbandwidth -t host_to_device_memcpy_ce ...` for
//     ParseNVBandwidth. GB/s are 1e9 bytes/s; latency matrices are in ns.
//   - stress-ng: `stress-ng --cpu 0 --vm 2 --vm-bytes 80% -t 30m
//     --metrics-brief` for ParseStressNG (its log, on stderr), and
//     `--yaml FILE` for ParseStressNGYAML.
//   - fio: `fio --output-format=json JOBFILE` for ParseFio. fio's JSON gives
//     bandwidth as "bw" in KiB/s and "bw_bytes" in bytes/s, latency in ns.
//   - iperf3: `iperf3 -c HOST -t 30 -P 8 -J` for ParseIperf3, in bits/s.
//   - perftest: `ib_write_bw -d mlx5_0 --report_gbits -s 65536 -D 10 HOST`
//     for ParseIBWriteBW; without --report_gbits perftest prints MB/sec with
//     MB = 2^20 bytes. Results are bits/s either way.
//   - Debian's own (sites without NVIDIA's repositories): the CUDA samples
//     11.8 `bandwidthTest --device=N --memory=pinned` (ParseBandwidthTest),
//     `p2pBandwidthLatencyTest` (ParseP2P), `matrixMulCUBLAS -device=N
//     -sizemult=10` (ParseCUBLAS) and `clpeak --compute-sp` (ParseClpeak).
//     matrixMulCUBLAS is the GEMM with a result check: every run compares
//     the whole product with one the CPU computed and prints PASS or FAIL,
//     and -device picks the GPU. batchCUBLAS also prints a check, but over
//     many small batched shapes, with no one rate per GPU to hold to a
//     floor. matrixMulCUBLAS's matrices are small (the sample caps
//     -sizemult at 10), so the runner repeats it on every GPU at once for
//     the burn-in duration, and its min comes from a measured node.
//   - In-band sampling while load runs: `nvidia-smi
//     --query-gpu=index,pci.bus_id,temperature.gpu,power.draw,clocks_throttle_reasons.active
//     --format=csv,noheader,nounits -lms 5000` for ParseGPUSamples, and the
//     kernel log (`dmesg` or `journalctl -k`) for ParseXIDs. Summary folds
//     both into per-GPU maxima and Xid counts.
//
// Fixtures in testdata/<tool>/ are written, not captured: by hand, or from
// each tool's source (testdata/README.md says which).
package burnin
