# kiln: one Makefile for the library, the CLI, tests, sanitizer and fuzz builds.
#
#   make            build build/kiln (the CLI) and build/libkiln.a
#   make check      unit tests + conformance (the README's test command runs this)
#   make asan       unit + conformance tests under ASan + UBSan (build-asan/)
#   make ubsan      the same under UBSan alone (build-ubsan/)
#   make fuzz       the ONNX-loader fuzzer (clang, libFuzzer), 60 s unless FUZZ_SECONDS=
#   make clean

BUILD    ?= build
CC       ?= cc
PROTOC_C ?= protoc-c
ONNX_PROTO ?= /usr/include/onnx/onnx.proto
WERROR   ?= $(if $(CI),-Werror,)
OPT      ?= -O2 -g
SAN      ?=

CFLAGS_BASE = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wstrict-prototypes \
              -Wmissing-prototypes -Wno-unused-parameter $(WERROR) \
              -fvisibility=hidden -Iinclude -Isrc -I$(BUILD)/gen
CFLAGS  += $(CFLAGS_BASE) $(OPT) $(SAN)
LDLIBS  += -lprotobuf-c -lsqlite3 -lm -lpthread -ldl -lz

SRC      := $(sort $(wildcard src/*/*.c src/target/c/*.c src/target/cuda/*.c))
GEN_C    := $(BUILD)/gen/onnx.pb-c.c
KC_FILES := $(sort $(wildcard src/target/c/kernels/*.c src/target/c/kernels/*.h)) src/runtime/cprog.h
KG_FILES := $(sort $(wildcard src/target/cuda/kernels/*))
OBJ      := $(SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/onnx.pb-c.o $(BUILD)/obj/gen/kc_sources.o \
            $(BUILD)/obj/gen/kg_sources.o
LIB      := $(BUILD)/libkiln.a
TOOLS    := $(BUILD)/kiln
# gpu_gemm includes emit_gemm.c: building it with the rest keeps the two in step
TESTS    := $(BUILD)/test_unit $(BUILD)/conformance $(BUILD)/roundtrip $(BUILD)/test_ops $(BUILD)/test_kc $(BUILD)/kc_bench \
            $(BUILD)/gpu_smoke $(BUILD)/gpu_runtime $(BUILD)/gpu_gemm

.PHONY: all check asan ubsan fuzz clean tests

all: $(TOOLS) $(TESTS)

# One protoc-c run writes both files: the header is the source's by-product,
# so parallel makes do not run protoc-c twice at once (a race on onnx.proto).
$(BUILD)/gen/onnx.pb-c.h: $(BUILD)/gen/onnx.pb-c.c ;
$(BUILD)/gen/onnx.pb-c.c: $(ONNX_PROTO)
	@mkdir -p $(BUILD)/gen
	cp -f $(ONNX_PROTO) $(BUILD)/gen/onnx.proto
	cd $(BUILD)/gen && $(PROTOC_C) --c_out=. onnx.proto

$(BUILD)/embed: tools/embed.c
	@mkdir -p $(BUILD)
	$(CC) -O1 $< -o $@

$(BUILD)/gen/kc_sources.c: $(BUILD)/embed $(KC_FILES)
	@mkdir -p $(BUILD)/gen
	$(BUILD)/embed $@ target/c/c-impl.h c_source c_kernel_sources $(KC_FILES)

$(BUILD)/gen/kg_sources.c: $(BUILD)/embed $(KG_FILES)
	@mkdir -p $(BUILD)/gen
	$(BUILD)/embed $@ target/cuda/cuda-impl.h cg_source cg_kernel_sources $(KG_FILES)

$(BUILD)/obj/gen/%_sources.o: $(BUILD)/gen/%_sources.c $(BUILD)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/gen/onnx.pb-c.o: $(GEN_C)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(OPT) $(SAN) -fvisibility=hidden -I$(BUILD)/gen -c $< -o $@

$(BUILD)/obj/%.o: %.c $(BUILD)/gen/onnx.pb-c.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/kiln: $(BUILD)/obj/tools/kiln.o $(OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_unit: $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/unit/*.c)) $(OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/conformance: $(BUILD)/obj/tests/conformance/conformance.o $(BUILD)/obj/tests/conformance/cases.o $(OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/roundtrip: $(BUILD)/obj/tests/conformance/roundtrip.o $(BUILD)/obj/tests/conformance/cases.o $(OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The CUDA smoke test, for a GPU machine (tests/gpu/smoke.c says what it
# checks); built from the library archive so it needs only libc and libdl.
$(BUILD)/gpu_smoke: $(BUILD)/obj/tests/gpu/smoke.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ -lm -lpthread -ldl

# The CUDA runtime on a GPU (tests/gpu/runtime.c says what it checks; run
# it from the repository root).
$(BUILD)/gpu_runtime: $(BUILD)/obj/tests/gpu/runtime.o $(BUILD)/obj/tests/unit/model_builder.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The GEMM templates on a GPU against a host reference, and their speed
# (bench/gpu_gemm.c; bench/gpu_gemm.py puts cuBLAS beside it).
$(BUILD)/gpu_gemm: $(BUILD)/obj/bench/gpu_gemm.o $(LIB)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/test_ops: $(BUILD)/obj/tests/ops/test_ops.o $(BUILD)/obj/tests/unit/model_builder.o $(OBJ)
	$(CC) $(CFLAGS) $^ -o $@ $(LDLIBS)

# The kernel templates are compiled per model at run time; these build them
# for their own tests and benchmark, for this machine's ISA.
KC_DIR := src/target/c/kernels
KC_SRC := $(wildcard $(KC_DIR)/kc_*.c)
KC_DEP := $(KC_SRC) $(KC_DIR)/kc.h $(KC_DIR)/kc_math.h
$(BUILD)/test_kc: tests/kernels/test_kc.c $(KC_DEP)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O2 -march=native $(SAN) -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	    $(WERROR) -I$(KC_DIR) $< $(KC_SRC) -lm -o $@

$(BUILD)/kc_bench: bench/kc_bench.c $(KC_DEP)
	@mkdir -p $(BUILD)
	$(CC) -std=c11 -O3 -march=native -I$(KC_DIR) $< $(KC_SRC) -lm -o $@

check: all
	./tests/run.sh $(BUILD)

asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined" all
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./tests/run.sh build-asan

ubsan:
	$(MAKE) BUILD=build-ubsan OPT="-O1 -g" SAN="-fsanitize=undefined -fno-sanitize-recover=undefined" all
	UBSAN_OPTIONS=print_stacktrace=1 ./tests/run.sh build-ubsan

FUZZ_SECONDS ?= 60
FUZZ_SEEDS   ?= /usr/share/libonnx-testdata/data/node
# Seeds: the small conformance models (read in place, not copied into the
# repo) plus tests/fuzz/corpus, the corpus kept from earlier runs, into which
# the new findings are merged at the end.
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang WERROR= OPT="-O1 -g" \
	    SAN="-fsanitize=fuzzer-no-link,address,undefined" build-fuzz/libkiln.a
	clang -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=fuzzer,address,undefined -Iinclude -Isrc -Ibuild-fuzz/gen \
	    tests/fuzz/fuzz_onnx.c -Wl,--whole-archive build-fuzz/libkiln.a -Wl,--no-whole-archive \
	    -o build-fuzz/fuzz_onnx $(LDLIBS)
	rm -rf build-fuzz/seeds build-fuzz/work && mkdir -p build-fuzz/seeds build-fuzz/work tests/fuzz/corpus
	find $(FUZZ_SEEDS) -name model.onnx -size -4k | head -300 | \
	    while read f; do cp "$$f" "build-fuzz/seeds/$$(echo $$f | md5sum | cut -c1-16)"; done
	./build-fuzz/fuzz_onnx -max_total_time=$(FUZZ_SECONDS) -max_len=16384 -rss_limit_mb=2048 \
	    -timeout=10 build-fuzz/work tests/fuzz/corpus build-fuzz/seeds
	./build-fuzz/fuzz_onnx -merge=1 tests/fuzz/corpus build-fuzz/work
	@# keep only generated inputs, not verbatim copies of the seed models
	cd build-fuzz/seeds && sha1sum * | cut -d' ' -f1 | sort > ../seed.sha1
	cd tests/fuzz/corpus && for f in *; do \
	    grep -qx "$$(sha1sum "$$f" | cut -d' ' -f1)" ../../../build-fuzz/seed.sha1 && rm -f "$$f"; done; true
	@echo "fuzz: corpus kept in tests/fuzz/corpus ($$(ls tests/fuzz/corpus | wc -l) files)"

clean:
	rm -rf build build-asan build-ubsan build-fuzz

-include $(OBJ:.o=.d) $(wildcard $(BUILD)/obj/tests/*/*.d $(BUILD)/obj/tools/*.d $(BUILD)/obj/bench/*.d)
