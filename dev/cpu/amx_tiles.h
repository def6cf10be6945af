// AMX set-up for the dev/cpu experiments: the process asks Linux for the
// tile state once (arch_prctl), and each thread loads a tile configuration
// before its first tile instruction: here all 8 tiles as 16 rows of 64
// bytes (16 float32 or 32 bf16 per row).
#pragma once

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

inline bool request_amx() {
  constexpr int kArchReqXcompPerm = 0x1023;  // arch_prctl: ask the kernel for an XSAVE feature
  constexpr int kXfeatureXtiledata = 18;      // AMX tile data
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return true;
  std::perror("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA)");
  return false;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

inline void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}
