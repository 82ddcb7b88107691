/* The README's "In an engine" C example, run on a built pack (CI compiles it with the system
 * C compiler against libkiln_runtime.a and runs it on the demo's spirv.kpack):
 *   cc -I crates/kiln-runtime/include crates/kiln-runtime/examples/load_variant.c \
 *      target/release/libkiln_runtime.a -lpthread -ldl -lm -o load_variant
 *   ./load_variant examples/demo/out/spirv.kpack */
#include <stdio.h>

#include "kiln_runtime.h"

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "examples/demo/out/spirv.kpack";
    KilnLibrary *lib;
    if (kiln_library_open(path, &lib) != KILN_OK) {
        fprintf(stderr, "kiln: %s\n", kiln_last_error());
        return 1;
    }
    const char *keywords[] = {"SKIN", "LIGHTS_4", "FOG"}; /* any order, repeats ok */
    KilnVariant v;
    if (kiln_library_get(lib, "Lit", "Forward", keywords, 3, "spirv", &v) != KILN_OK) {
        fprintf(stderr, "kiln: %s\n", kiln_last_error());
        kiln_library_close(lib);
        return 1;
    }
    printf("Lit/Forward[FOG;LIGHTS_4;SKIN] %s: %zu bytes\n", v.digest, v.len);
    const char *unknown[] = {"FOGG"};
    KilnStatus status = kiln_library_get(lib, "Lit", "Forward", unknown, 1, "spirv", &v);
    printf("unknown keyword: status %d: %s\n", (int)status, kiln_last_error());
    kiln_library_close(lib);
    return status == KILN_ERR_UNKNOWN_KEYWORD ? 0 : 1;
}
