/* The C ABI from C, through include/kiln_runtime.h only (run by tests/c_abi.rs).
 *
 *   lookup PACK [SHADER PASS TARGET KEYWORDS DIGEST BYTES]... [--not-built SHADER PASS TARGET KEYWORDS]
 *
 * KEYWORDS is kiln's text form, `;`-separated (`FOG;SKIN`, "" for none); BYTES is the
 * artifact's expected content, as text. Each variant is looked up and its bytes, length and
 * digest checked; then, on the first variant given: a permuted and repeated keyword list
 * borrows the same bytes, an unknown keyword, target, shader and pass, NULL and non-UTF-8
 * arguments, missing and foreign packs, and four threads looking up at once. Prints one
 * line per check; exits 0 when all pass, 1 at the first failure. */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln_runtime.h"

#define MAX_KEYWORDS 32

static int checks = 0;

static void fail(const char *what, KilnStatus status) {
    fprintf(stderr, "FAIL: %s (status %d: %s)\n", what, (int)status, kiln_last_error());
    exit(1);
}

static void expect(int condition, const char *what, KilnStatus status) {
    if (!condition) {
        fail(what, status);
    }
    checks++;
}

/* Splits `text` (copied into `buffer`) at ';' into `out`; returns the count. */
static size_t split(const char *text, char *buffer, size_t size, const char **out) {
    size_t n = 0;
    if (strlen(text) >= size) {
        fprintf(stderr, "FAIL: keyword list too long: %s\n", text);
        exit(1);
    }
    strcpy(buffer, text);
    if (buffer[0] == '\0') {
        return 0;
    }
    out[n++] = buffer;
    for (char *p = buffer; *p != '\0'; p++) {
        if (*p == ';') {
            *p = '\0';
            if (n == MAX_KEYWORDS) {
                fprintf(stderr, "FAIL: more than %d keywords\n", MAX_KEYWORDS);
                exit(1);
            }
            out[n++] = p + 1;
        }
    }
    return n;
}

typedef struct Lookup {
    const char *shader;
    const char *pass;
    const char *target;
    const char *keywords[MAX_KEYWORDS];
    size_t keyword_count;
    char buffer[512];
} Lookup;

static void parse(Lookup *l, char **argv) {
    l->shader = argv[0];
    l->pass = argv[1];
    l->target = argv[2];
    l->keyword_count = split(argv[3], l->buffer, sizeof l->buffer, l->keywords);
}

static KilnStatus get(const KilnLibrary *lib, const Lookup *l, KilnVariant *out) {
    return kiln_library_get(lib, l->shader, l->pass, l->keywords, l->keyword_count, l->target,
                            out);
}

static int zeroed(const KilnVariant *v) {
    return v->bytes == NULL && v->len == 0 && v->reflection == NULL && v->reflection_len == 0 &&
           v->digest[0] == '\0';
}

typedef struct Shared {
    const KilnLibrary *lib;
    const Lookup *first;
    const uint8_t *bytes;
    int ok;
} Shared;

static void *lookup_many(void *arg) {
    Shared *shared = arg;
    KilnVariant v;
    shared->ok = kiln_last_error()[0] == '\0'; /* a new thread has no message */
    for (int i = 0; i < 1000 && shared->ok; i++) {
        shared->ok = get(shared->lib, shared->first, &v) == KILN_OK && v.bytes == shared->bytes;
    }
    return NULL;
}

int main(int argc, char **argv) {
    KilnLibrary *lib = NULL;
    KilnVariant v;
    KilnStatus s;
    Lookup first, other;
    int have_first = 0;
    char message[1024];

    if (argc < 2) {
        fprintf(stderr, "usage: %s PACK [SHADER PASS TARGET KEYWORDS DIGEST BYTES]...\n", argv[0]);
        return 2;
    }
    s = kiln_library_open(argv[1], &lib);
    expect(s == KILN_OK && lib != NULL, "open the pack", s);
    printf("ok open: %zu variants\n", kiln_library_len(lib));

    for (int i = 2; i < argc;) {
        if (strcmp(argv[i], "--not-built") == 0 && i + 4 < argc) {
            parse(&other, argv + i + 1);
            s = get(lib, &other, &v);
            expect(s == KILN_ERR_NOT_BUILT && zeroed(&v), "an unbuilt set is KILN_ERR_NOT_BUILT", s);
            printf("ok not built: %s\n", kiln_last_error());
            i += 5;
        } else if (i + 5 < argc) {
            const char *digest = argv[i + 4], *bytes = argv[i + 5];
            Lookup *l = have_first ? &other : &first;
            parse(l, argv + i);
            s = get(lib, l, &v);
            snprintf(message, sizeof message, "look up %s/%s[%s] for %s", argv[i], argv[i + 1],
                     argv[i + 3], argv[i + 2]);
            expect(s == KILN_OK, message, s);
            expect(v.len == strlen(bytes) && memcmp(v.bytes, bytes, v.len) == 0, message, s);
            expect(strcmp(v.digest, digest) == 0 && v.digest[12] == '\0', message, s);
            expect(v.reflection != NULL && v.reflection_len == 0, message, s);
            printf("ok %s/%s[%s] %s: %zu bytes, digest %s\n", argv[i], argv[i + 1], argv[i + 3],
                   argv[i + 2], v.len, v.digest);
            have_first = 1;
            i += 6;
        } else {
            fprintf(stderr, "usage: incomplete arguments from %s\n", argv[i]);
            return 2;
        }
    }
    if (!have_first) {
        fprintf(stderr, "usage: no variant to look up\n");
        return 2;
    }

    /* The first variant's keywords reversed and each repeated: the same bytes, borrowed. */
    {
        KilnVariant again;
        const char *permuted[2 * MAX_KEYWORDS];
        size_t n = first.keyword_count;
        s = get(lib, &first, &v);
        expect(s == KILN_OK, "look up the first variant again", s);
        for (size_t k = 0; k < n; k++) {
            permuted[k] = first.keywords[n - 1 - k];
            permuted[n + k] = first.keywords[k];
        }
        s = kiln_library_get(lib, first.shader, first.pass, permuted, 2 * n, first.target, &again);
        expect(s == KILN_OK && again.bytes == v.bytes && again.len == v.len,
               "a permuted, repeated keyword list borrows the same bytes", s);
        printf("ok permuted and repeated (%zu keywords): same bytes pointer\n", 2 * n);
    }

    /* Errors, each with its status and message. */
    {
        const char *unknown[] = {"KILN_NO_SUCH_KEYWORD"};
        s = kiln_library_get(lib, first.shader, first.pass, unknown, 1, first.target, &v);
        expect(s == KILN_ERR_UNKNOWN_KEYWORD && zeroed(&v), "unknown keyword status", s);
        expect(strstr(kiln_last_error(), "`KILN_NO_SUCH_KEYWORD`") != NULL,
               "unknown keyword message names it", s);
        printf("ok unknown keyword: %s\n", kiln_last_error());

        const char *invalid[] = {"TWO WORDS"};
        s = kiln_library_get(lib, first.shader, first.pass, invalid, 1, first.target, &v);
        expect(s == KILN_ERR_INVALID_KEYWORD, "invalid keyword status", s);
        s = kiln_library_get(lib, first.shader, first.pass, NULL, 0, "no-such-target", &v);
        expect(s == KILN_ERR_UNKNOWN_TARGET, "unknown target status", s);
        s = kiln_library_get(lib, "NoSuchShader", first.pass, NULL, 0, first.target, &v);
        expect(s == KILN_ERR_UNKNOWN_SHADER, "unknown shader status", s);
        s = kiln_library_get(lib, first.shader, "NoSuchPass", NULL, 0, first.target, &v);
        expect(s == KILN_ERR_UNKNOWN_PASS, "unknown pass status", s);
        printf("ok unknown pass: %s\n", kiln_last_error());
        s = kiln_library_get(lib, "\xff\xfe", first.pass, NULL, 0, first.target, &v);
        expect(s == KILN_ERR_INVALID_UTF8, "non-UTF-8 shader status", s);
        printf("ok invalid UTF-8: %s\n", kiln_last_error());
    }

    /* NULL arguments. */
    {
        const char *with_null[] = {first.keyword_count ? first.keywords[0] : "X", NULL};
        KilnLibrary *none = (KilnLibrary *)&v;
        size_t count = 0;
        s = kiln_library_get(NULL, first.shader, first.pass, NULL, 0, first.target, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL library", s);
        s = kiln_library_get(lib, NULL, first.pass, NULL, 0, first.target, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL shader", s);
        s = kiln_library_get(lib, first.shader, NULL, NULL, 0, first.target, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL pass", s);
        s = kiln_library_get(lib, first.shader, first.pass, NULL, 0, NULL, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL target", s);
        s = kiln_library_get(lib, first.shader, first.pass, NULL, 1, first.target, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL keywords with a count of 1", s);
        s = kiln_library_get(lib, first.shader, first.pass, with_null, 2, first.target, &v);
        expect(s == KILN_ERR_NULL_ARGUMENT, "a NULL keyword", s);
        printf("ok NULL keyword: %s\n", kiln_last_error());
        s = kiln_library_get(lib, first.shader, first.pass, NULL, 0, first.target, NULL);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL out", s);
        s = kiln_library_open(NULL, &none);
        expect(s == KILN_ERR_NULL_ARGUMENT && none == NULL, "NULL path", s);
        s = kiln_library_open(argv[1], NULL);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL out library", s);
        s = kiln_library_variant_count(lib, first.shader, NULL);
        expect(s == KILN_ERR_NULL_ARGUMENT, "NULL count", s);
        s = kiln_library_variant_count(lib, first.shader, &count);
        expect(s == KILN_OK && count >= 1, "variant count", s);
        expect(kiln_library_len(NULL) == 0, "len of NULL", KILN_OK);
        kiln_library_close(NULL);
        printf("ok NULL arguments; %s has %zu variants\n", first.shader, count);
    }

    /* Packs that cannot be opened. */
    {
        KilnLibrary *other_lib = NULL;
        snprintf(message, sizeof message, "%s.missing", argv[1]);
        s = kiln_library_open(message, &other_lib);
        expect(s == KILN_ERR_IO && other_lib == NULL, "a missing pack is KILN_ERR_IO", s);
        s = kiln_library_open(argv[0], &other_lib); /* this program: not a pack */
        expect(s == KILN_ERR_CORRUPT && other_lib == NULL, "a foreign file is KILN_ERR_CORRUPT", s);
        printf("ok foreign file: KILN_ERR_CORRUPT\n");
    }

    /* Four threads share the library; each has its own last error. */
    {
        pthread_t threads[4];
        Shared shared[4];
        s = get(lib, &first, &v);
        expect(s == KILN_OK, "look up before the threads", s);
        for (int t = 0; t < 4; t++) {
            shared[t].lib = lib;
            shared[t].first = &first;
            shared[t].bytes = v.bytes;
            shared[t].ok = 0;
            expect(pthread_create(&threads[t], NULL, lookup_many, &shared[t]) == 0,
                   "start a thread", KILN_OK);
        }
        for (int t = 0; t < 4; t++) {
            expect(pthread_join(threads[t], NULL) == 0 && shared[t].ok, "a thread's lookups",
                   KILN_OK);
        }
        printf("ok 4 threads x 1000 lookups\n");
    }

    kiln_library_close(lib);
    printf("lookup: all %d checks passed\n", checks);
    return 0;
}
