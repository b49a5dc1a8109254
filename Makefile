# smrules - build, test, bench, install.  GNU make; libraries via pkg-config.
#
#   make              build build/smrules
#   make check        every test (unit + CLI end-to-end), then the same suite
#                     under ASan/UBSan (build-san/)
#   make check-fast   the suite once, without the sanitizer pass
#   make fuzz         build the libFuzzer targets and run each for FUZZ_SECONDS
#   make bench        benchmarks (see bench/README.md)
#   make install PREFIX=/usr/local   (DESTDIR honoured)
#   make python       the Python package in build/python (PYTHONPATH=build/python)
#   make install-python   the Python package for /usr/bin/python3 (docs/python.md)
#   make format       clang-format every C file

PREFIX ?= /usr/local
# The release, from its one place (core/include/smrules/version.h).
VERSION := $(shell sed -n 's/^\#define SMRULES_VERSION "\(.*\)"$$/\1/p' core/include/smrules/version.h)
SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
OPT = -O1
else
BUILD ?= build
SANFLAGS =
OPT = -O2
endif

PKGS = lua5.4 libcjson libprotobuf-c sqlite3 yaml-0.1 libpcre2-8 zlib
# libcurl: its headers only; it is loaded when first used
# (core/base/curl_lazy.c), not linked, so a start of smrules does not pay
# for mapping it and its thirty libraries.
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) libcurl)
PKG_LIBS := $(shell pkg-config --libs $(PKGS))

CC ?= cc
WARN = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
       -Wmissing-declarations -Wno-unused-parameter
CFLAGS_ALL = -std=c11 -D_GNU_SOURCE -g $(OPT) -fPIC $(WARN) $(SANFLAGS) \
             -Icore -Icore/include -I$(BUILD)/gen $(PKG_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = $(SANFLAGS) $(LDFLAGS)
LIBS = $(PKG_LIBS) -ldl -lpthread -lm

PROTO = core/format/proto/smdebug_event.proto
GEN_C = $(BUILD)/gen/smdebug_event.pb-c.c
GEN_H = $(BUILD)/gen/smdebug_event.pb-c.h

CORE_SRC = $(filter-out core/cli/main.c,$(wildcard core/*/*.c))
EMBED_FILES = $(sort $(wildcard schemas/*.json lua/*.lua rules/*.yaml))
CORE_OBJ = $(patsubst core/%.c,$(BUILD)/core/%.o,$(CORE_SRC)) $(BUILD)/gen/smdebug_event.pb-c.o \
           $(BUILD)/gen/embedded.o
LIB = $(BUILD)/libsmrules.a
BIN = $(BUILD)/smrules

UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))

# One built-in rule per folder: plugins/tensor/<rule>/ and
# plugins/profiler/<rule>/, each built into $(BUILD)/plugins/<rule>.so.
PLUGIN_DIRS = $(sort $(dir $(wildcard plugins/tensor/*/*.c plugins/profiler/*/*.c)))
PLUGIN_SO = $(foreach d,$(PLUGIN_DIRS),$(BUILD)/plugins/$(notdir $(patsubst %/,%,$(d))).so)

BENCH_SRC = $(wildcard bench/*.c)
BENCH_BIN = $(patsubst bench/%.c,$(BUILD)/bench/%,$(BENCH_SRC))

FUZZ_SRC = $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_SECONDS ?= 30

.PHONY: all check check-fast check-san unit fuzz bench install format clean python install-python print-version
all: $(BIN) $(PLUGIN_SO) $(BUILD)/demo-trainer

# A pattern rule with two targets is one recipe making both (every GNU
# make; `&:` needs 4.3): an explicit two-target rule would run protoc-c once
# per target, twice at once under make -j.
$(BUILD)/gen/%.pb-c.c $(BUILD)/gen/%.pb-c.h: core/format/proto/%.proto
	@mkdir -p $(BUILD)/gen
	protoc-c --proto_path=core/format/proto --c_out=$(BUILD)/gen $<

$(BUILD)/gen/smdebug_event.pb-c.o: $(GEN_C)
	$(CC) $(filter-out -Wshadow -Wstrict-prototypes,$(CFLAGS_ALL)) -Wno-missing-braces -c $< -o $@

$(BUILD)/gen/embedded.c: tools/embed.sh $(EMBED_FILES)
	@mkdir -p $(BUILD)/gen
	sh tools/embed.sh $(EMBED_FILES) > $@

$(BUILD)/gen/embedded.o: $(BUILD)/gen/embedded.c
	$(CC) $(CFLAGS_ALL) -c $< -o $@

# -MMD -MP: each object depends on exactly the headers it includes (the
# .d files beside the objects), so touching one header rebuilds only the
# files that use it.
DEPFLAGS = -MMD -MP
$(BUILD)/core/%.o: core/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -c $< -o $@

$(LIB): $(CORE_OBJ)
	rm -f $@
	ar rcs $@ $^

# -rdynamic: plugins resolve nothing from the host by symbol (they get a
# function table), but Lua's C API must be visible to nothing either; kept
# off.  The binary links the static core library.
$(BIN): $(BUILD)/core/cli/main.o $(LIB)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(LIBS)

# Plugins see the public SDK (core/include: smrules.h, rulekit.h, json.h)
# and the plugin kits, never core/.  The kits, each an archive so that a plugin
# takes only what it uses (plugins link nothing of the host):
#   plugins/kit/      rulekit + npmath (+ the JSON model of smrules/json.h,
#                     compiled from core/base/json.c): what every rule uses; installed
#                     with smrules/rulekit.h as libsmrules-rulekit.a for
#                     third-party plugins (smrules.pc: --cflags --libs)
#   plugins/profkit/  dicts, series and framework-metric helpers of the
#                     profiler rules
#   plugins/engines/  the profiler rules' engines (system-metric and
#                     framework-metric), shared by each rule's plugin and
#                     ProfilerReport, which links them like any kit
# Archives are listed users first, for the linker.
PLUGIN_CFLAGS = -std=c11 -D_GNU_SOURCE -g $(OPT) -fPIC $(WARN) $(SANFLAGS) \
                -fvisibility=hidden -Icore/include -Iplugins/kit \
                -Iplugins/profkit -Iplugins/engines $(CFLAGS)
PLUGKIT_DIRS = engines profkit kit
PLUGKIT_HDR = $(wildcard $(patsubst %,plugins/%/*.h,$(PLUGKIT_DIRS))) \
              $(wildcard core/include/smrules/*.h)
RULEKIT_HDR = $(wildcard plugins/kit/*.h core/include/smrules/*.h)
RULEKIT = $(BUILD)/plugins/libsmrules-rulekit.a
PLUGKIT = $(BUILD)/plugins/libengines.a $(BUILD)/plugins/libprofkit.a $(RULEKIT)
kit_objs = $(patsubst plugins/%.c,$(BUILD)/plugins/%.o,$(wildcard plugins/$(1)/*.c))

$(BUILD)/plugins/%.o: plugins/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/plugins/libengines.a: $(call kit_objs,engines)
$(BUILD)/plugins/libprofkit.a: $(call kit_objs,profkit)
# The JSON model (core/base/json.c, declared in the public smrules/json.h)
# is the host's and the rule kit's: one source, compiled into each.
KIT_BASE = $(patsubst %,$(BUILD)/plugins/kit/base_%.o,json json_write json_parse utf8)
$(BUILD)/plugins/kit/base_%.o: core/base/%.c
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_CFLAGS) -Icore $(DEPFLAGS) -c $< -o $@
$(RULEKIT): $(call kit_objs,kit) $(KIT_BASE)
$(PLUGKIT):
	rm -f $@
	ar rcs $@ $^

# A tensor rule needs only the rule kit; a profiler rule all three kits.
# Each plugin links exactly the archives it depends on, so that editing a
# profiler engine rebuilds the profiler plugins only.
plugin_kits = $(if $(wildcard plugins/tensor/$(1)/),$(RULEKIT_HDR) $(RULEKIT),$(PLUGKIT_HDR) $(PLUGKIT))

.SECONDEXPANSION:
$(BUILD)/plugins/%.so: $$(wildcard plugins/*/%/*.c) $$(wildcard plugins/*/%/*.h) \
                       $$(call plugin_kits,$$*)
	@mkdir -p $(dir $@)
	$(CC) $(PLUGIN_CFLAGS) -shared -o $@ \
	  $(filter %.c,$^) $(filter %.a,$^) $(LDFLAGS_ALL) -lm

$(BUILD)/tests/%: tests/unit/%.c tests/unit/unit.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(DEPFLAGS) -Itests/unit $(LDFLAGS_ALL) -o $@ $< $(LIB) $(LIBS)

# The plugins' kits are tested directly: the framework-metric statistics
# (profkit's fwkit), the profiler histories, and the rule kit's quantiles,
# value helpers and single rules' kernels.
KIT_TESTS = $(addprefix $(BUILD)/tests/,test_fwkit test_pk_hist test_rulekit_quantiles \
                                         test_rulekit_values test_rulekit_kernels)
$(KIT_TESTS): $(BUILD)/tests/%: tests/unit/%.c tests/unit/unit.h $(LIB) $(PLUGKIT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Iplugins/kit -Itests/unit $(LDFLAGS_ALL) -o $@ $< $(PLUGKIT) $(LIB) $(LIBS)

# WeightUpdateRatio's norm kernel against its element-by-element definition.
UPDATE_NORM = plugins/tensor/weight_update_ratio/update_norm
$(BUILD)/tests/test_update_norm: tests/unit/test_update_norm.c tests/unit/unit.h $(UPDATE_NORM).c $(UPDATE_NORM).h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests/unit $(LDFLAGS_ALL) -o $@ $< $(UPDATE_NORM).c -lm

# No kernel returns with the YMM upper halves in use (the rule kit's,
# WeightUpdateRatio's and the host's statistics).
$(BUILD)/tests/test_simd_state: tests/unit/test_simd_state.c tests/unit/unit.h $(UPDATE_NORM).c $(UPDATE_NORM).h $(LIB) $(PLUGKIT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Iplugins/kit -Iplugins/tensor/weight_update_ratio -Itests/unit $(LDFLAGS_ALL) \
	  -o $@ $< $(UPDATE_NORM).c $(PLUGKIT) $(LIB) $(LIBS)

# The stand-in training job of the demo and the live tests.
$(BUILD)/demo-trainer: examples/trainer/demo_trainer.c $(LIB)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(LIB) $(LIBS)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) $(LDFLAGS_ALL) -o $@ $< $(LIB) $(LIBS)

# Each per-element rule's own pass in GB/s (bench/README.md, section 14):
# the rule kit's kernels, WeightUpdateRatio's norm kernel and the host's
# statistics, timed where the rules call them.
$(BUILD)/bench/kernel_bench: bench/kernel_bench.c $(UPDATE_NORM).c $(UPDATE_NORM).h $(LIB) $(RULEKIT)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Iplugins/kit -Iplugins/tensor/weight_update_ratio $(LDFLAGS_ALL) \
	  -o $@ $< $(UPDATE_NORM).c $(RULEKIT) $(LIB) $(LIBS)

# Rules the CLI tests load as plugins (tests/cli/plugins/<name>.c), built
# against the public header only.  The 1.0 guard (sdk_guard.c) is built
# four times: a tensor rule and, with -DGUARD_PROFILER, a profiler rule,
# each against the current header and against the header as released with
# 1.0 (tests/fixtures/sdk-1.0/); test_sdk_guard.py compares their reports.
SDK_HDR = $(wildcard core/include/smrules/*.h)
SDK_1_0 = $(wildcard tests/fixtures/sdk-1.0/smrules/*.h)
GUARD_SO = sdk_guard.so sdk_guard-1.0.so sdk_guard_prof.so sdk_guard_prof-1.0.so
TEST_PLUGINS = $(BUILD)/tests/plugins/gate.so $(BUILD)/tests/plugins/slow_clock.so \
               $(BUILD)/tests/plugins/composite.so \
               $(addprefix $(BUILD)/tests/plugins/,$(GUARD_SO))
TEST_PLUGIN_CC = $(CC) -std=c11 -D_GNU_SOURCE -g -O2 -fPIC -shared $(WARN)
# hold.h: the wait for a file that gate.c and slow_clock.c share
TEST_PLUGIN_HDR = $(wildcard tests/cli/plugins/*.h)
$(BUILD)/tests/plugins/%.so: tests/cli/plugins/%.c $(SDK_HDR) $(TEST_PLUGIN_HDR)
	@mkdir -p $(dir $@)
	$(TEST_PLUGIN_CC) -Icore/include -o $@ $<
$(BUILD)/tests/plugins/sdk_guard_prof.so: tests/cli/plugins/sdk_guard.c $(SDK_HDR)
	@mkdir -p $(dir $@)
	$(TEST_PLUGIN_CC) -DGUARD_PROFILER -Icore/include -o $@ $<
$(BUILD)/tests/plugins/sdk_guard-1.0.so: tests/cli/plugins/sdk_guard.c $(SDK_1_0)
	@mkdir -p $(dir $@)
	$(TEST_PLUGIN_CC) -Itests/fixtures/sdk-1.0 -o $@ $<
$(BUILD)/tests/plugins/sdk_guard_prof-1.0.so: tests/cli/plugins/sdk_guard.c $(SDK_1_0)
	@mkdir -p $(dir $@)
	$(TEST_PLUGIN_CC) -DGUARD_PROFILER -Itests/fixtures/sdk-1.0 -o $@ $<
# composite.so reads reports back with the JSON model: it links the rule kit
$(BUILD)/tests/plugins/composite.so: tests/cli/plugins/composite.c $(SDK_HDR) $(RULEKIT_HDR) $(RULEKIT)
	@mkdir -p $(dir $@)
	$(TEST_PLUGIN_CC) $(SANFLAGS) -fvisibility=hidden -Icore/include -o $@ $< $(RULEKIT) -lm

# Unit tests that load a built rule plugin at run time (dlopen from
# <build>/plugins/, next to <build>/tests/): the plugins are built with them.
#   test_old_host: profiler_report.so on a host with an older, shorter table
UNIT_PLUGINS = $(BUILD)/plugins/profiler_report.so
$(BUILD)/tests/test_old_host: | $(UNIT_PLUGINS)

# (the trial generators: tests/cli/test_real_trials_verdict.py runs bench
# section 12 on tiny trials)
unit: $(UNIT_BIN) $(TEST_PLUGINS) $(UNIT_PLUGINS) $(BUILD)/bench/scale_gen $(BUILD)/bench/cnn_gen

# The whole suite: unit tests and CLI end-to-end tests, normal build and
# then the ASan/UBSan build.  tests/run.sh prints the closing tally.
check: all unit python
	$(MAKE) SAN=1 all unit python
	SMRULES_BUILDS="$(BUILD) build-san" tests/run.sh

check-fast: all unit python
	SMRULES_BUILDS="$(BUILD)" tests/run.sh

# Fuzz targets: the core compiled once with clang's coverage and sanitizer
# instrumentation (fuzzer-no-link) into an archive, linked by each target.
FUZZ_CC = clang
FUZZ_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=address,undefined \
              -Icore -Icore/include -I$(BUILD)/gen $(PKG_CFLAGS)
FUZZ_OBJ = $(patsubst core/%.c,$(BUILD)/fuzzobj/%.o,$(CORE_SRC)) \
           $(BUILD)/fuzzobj/smdebug_event.pb-c.o $(BUILD)/fuzzobj/embedded.o
FUZZ_LIB = $(BUILD)/fuzzobj/libsmrules-fuzz.a

$(BUILD)/fuzzobj/%.o: core/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(BUILD)/fuzzobj/%.o: $(BUILD)/gen/%.c $(GEN_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_LIB): $(FUZZ_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) $(LIBS)

fuzz: $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRC))
	@for f in $^; do n=$$(basename $$f); mkdir -p $(BUILD)/fuzz/corpus-$$n; \
	  echo "== $$n ($(FUZZ_SECONDS)s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=512 \
	      $(BUILD)/fuzz/corpus-$$n tests/fuzz/seeds/$$n || exit 1; done

bench: all $(BENCH_BIN) python
	bench/run.sh $(BUILD)

# the user documentation the man page names (docs/ARCHITECTURE.md is the
# maintainer's map, not installed)
DOCDIR ?= $(PREFIX)/share/doc/smrules

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/smrules/plugins \
	  $(DESTDIR)$(PREFIX)/include/smrules $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	  $(DESTDIR)$(PREFIX)/share/smrules/lua $(DESTDIR)$(PREFIX)/share/smrules/rules \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(DOCDIR)/rules
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/smrules
	sed -e 's|/usr/local/share/doc/smrules|$(DOCDIR)|g' man/smrules.1 \
	  > $(DESTDIR)$(PREFIX)/share/man/man1/smrules.1
	install -m 644 $(filter-out docs/ARCHITECTURE.md,$(wildcard docs/*.md)) $(DESTDIR)$(DOCDIR)/
	install -m 644 docs/rules/*.md $(DESTDIR)$(DOCDIR)/rules/
	for so in $(PLUGIN_SO); do install -m 755 $$so $(DESTDIR)$(PREFIX)/lib/smrules/plugins/; done
	install -m 644 core/include/smrules/*.h $(DESTDIR)$(PREFIX)/include/smrules/
	install -m 644 $(RULEKIT) $(DESTDIR)$(PREFIX)/lib/
	-install -m 644 lua/*.lua $(DESTDIR)$(PREFIX)/share/smrules/lua/ 2>/dev/null
	-install -m 644 rules/*.lua $(DESTDIR)$(PREFIX)/share/smrules/rules/ 2>/dev/null
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' smrules.pc.in \
	  > $(DESTDIR)$(PREFIX)/lib/pkgconfig/smrules.pc

# The release version, as the Makefile reads it (tests/cli/test_version.py).
print-version:
	@echo $(VERSION)

# The Python package (python/): smrules._core links $(LIB), built -fPIC.
# Built for Debian's /usr/bin/python3 (python3-dev, python3-numpy,
# python3-setuptools), not whichever python3 is first on PATH.  The
# package lands in $(BUILD)/python, ready for PYTHONPATH; the tests use it
# there.  The sanitizer build makes no package: Python would need the
# sanitizer runtime preloaded; the san pass reads what the normal one writes.
PYTHON ?= /usr/bin/python3
PY_SRC = $(wildcard python/setup.py python/src/*.c python/src/*.h python/smrules/*.py python/smrules/*/*.py)
python: $(BUILD)/python/.built
# With SAN=1 the extension is built with the sanitizers too, and loads
# only with their runtimes preloaded (PY_SAN_PRELOAD): the sanitizer pass of
# `make check` runs the Python tests with it (tests/run.sh, pylib.py).
PY_SAN_PRELOAD = $(if $(SANFLAGS),$(shell $(CC) -print-file-name=libasan.so):$(shell $(CC) -print-file-name=libubsan.so))
$(BUILD)/python/.built: $(LIB) $(PY_SRC)
	cd python && SMRULES_BUILD=$(abspath $(BUILD)) SMRULES_SANFLAGS="$(SANFLAGS)" $(PYTHON) setup.py -q build \
	  --build-base $(abspath $(BUILD))/python-build --build-lib $(abspath $(BUILD))/python \
	  --force 2>&1 | grep -v -i -e deprecat -e "setup.py install" -e "^ *!!" -e "^ *\*\*\*" \
	  -e "^\s*$$" -e "pypa/setuptools" -e "standards-based" -e "blog" -e "See https" || true
	LD_PRELOAD="$(PY_SAN_PRELOAD)" ASAN_OPTIONS=detect_leaks=0 \
	  $(PYTHON) -c "import sys; sys.path.insert(0, '$(BUILD)/python'); import smrules._core"
	@# compiled now, as an installed package is: not again by every process
	@# that imports it from a folder it may not write (bench 11's scans)
	$(PYTHON) -m compileall -q $(BUILD)/python/smrules >/dev/null
	touch $@

# One command from a clone, as root or as a user, on Debian 12's
# externally-managed Python (no pip): root installs where Debian puts
# locally installed packages (/usr/local/lib/python3.X/dist-packages), a
# user into their user site (~/.local/lib/python3.X/site-packages); both
# are on /usr/bin/python3's path.  PY_DEST=<dir> chooses another folder.
install-python: python
	@dest="$(PY_DEST)"; \
	if [ -z "$$dest" ]; then \
	  if [ "$$(id -u)" -eq 0 ]; then \
	    dest=$$($(PYTHON) -c "import sysconfig; print(sysconfig.get_path('purelib'))"); \
	  else dest=$$($(PYTHON) -c "import site; print(site.getusersitepackages())"); fi; \
	fi; \
	mkdir -p "$$dest" && rm -rf "$$dest/smrules" && cp -r $(BUILD)/python/smrules "$$dest/" && \
	find "$$dest/smrules" -name __pycache__ -prune -exec rm -rf {} + && \
	echo "installed the smrules package in $$dest" && \
	cd / && PYTHONPATH="$$dest" $(PYTHON) -c "import smrules, smrules._core; print('import smrules: ok (' + smrules.__file__ + ')')"

format:
	clang-format -i core/*/*.c core/*/*.h core/include/smrules/*.h plugins/*/*.[ch] \
	  plugins/*/*/*.[ch] examples/plugin/*.c python/src/*.c tests/cli/plugins/*.[ch] tests/unit/*.c tests/unit/*.h tests/fuzz/*.c bench/*.c 2>/dev/null || true

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/core $(BUILD)/plugins $(BUILD)/fuzzobj $(BUILD)/tests -name '*.d' 2>/dev/null)
