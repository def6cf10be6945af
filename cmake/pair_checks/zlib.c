/* zlib's header version against the linked library's (zlib's own rule:
 * the first character must match). */
#include <stdio.h>
#include <zlib.h>

int main(void) {
  const char* lib = zlibVersion();
  printf("header zlib %s, library %s\n", ZLIB_VERSION, lib);
  return lib[0] == ZLIB_VERSION[0] ? 0 : 1;
}
