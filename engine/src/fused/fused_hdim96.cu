// The fused kernels for head dim 96 (one file per head dim keeps builds parallel and short).
#include "fused/fused_launch.cuh"

template struct attn::FusedLaunch<96>;
