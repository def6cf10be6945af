/* The header's JPEG_LIB_VERSION against the library that is linked: libjpeg
 * refuses a mismatched caller with "Wrong JPEG library version" (error 13). */
#include <stdio.h>
#include <setjmp.h>
#include <jpeglib.h>

static jmp_buf env;
static int code;
static void on_error(j_common_ptr cinfo) {
  code = cinfo->err->msg_code;
  longjmp(env, 1);
}

int main(void) {
  struct jpeg_decompress_struct cinfo;
  struct jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  err.error_exit = on_error;
  if (setjmp(env)) {
    printf("header libjpeg %d: the library refused it (message code %d)\n", JPEG_LIB_VERSION, code);
    return 1;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  printf("libjpeg %d\n", JPEG_LIB_VERSION);
  return 0;
}
