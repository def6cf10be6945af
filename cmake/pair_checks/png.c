/* libpng's header version against the linked library's. */
#include <stdio.h>
#include <png.h>

int main(void) {
  const png_uint_32 lib = png_access_version_number();
  printf("header libpng %d, library %u\n", PNG_LIBPNG_VER, (unsigned)lib);
  /* Same major.minor: 1.6.x headers work with any 1.6.y library. */
  return (lib / 100) == (PNG_LIBPNG_VER / 100) ? 0 : 1;
}
