# tilegraph - the two commands a new user runs (as root on Debian):
#   make demo   installs what is missing, builds, trains the tutorial model
#   make test   installs what is missing, builds, runs the whole test suite
# Other targets: build, test-isa, install (PREFIX, DESTDIR), bench, format, format-check, asan, tsan,
# fuzz, clean, options-doc.

BUILD      ?= build
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
PREFIX     ?= /usr/local
# Python's package index's packages (transformers, onnxruntime, ...) live in
# this virtual environment, made from Debian's python3 (docs/dependencies.md).
TG_VENV    ?= /opt/tilegraph/venv

# Every Debian package the project needs, and why (docs/dependencies.md).
DEB_PACKAGES = build-essential cmake pkg-config libopenblas-dev zlib1g-dev \
               libsqlite3-dev sqlite3 dataset-fashion-mnist clang clang-format chromium \
               libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata python3 \
               python3-torch python3-torchvision python3-numpy python3-cffi python3-onnx \
               python3-tqdm python3-venv openmpi-bin libopenmpi-dev libdnnl-dev iproute2 \
               iputils-ping
DEB_BENCH_PACKAGES = python3-torch python3-numpy

.PHONY: all demo test test-heavy test-isa build install format-check deps bench-deps bench format asan tsan fuzz clean options-doc

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then echo "need root to install:$$missing" >&2; exit 1; fi; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@TG_VENV=$(TG_VENV) sh scripts/index_deps.sh .

bench-deps: deps
	@missing=""; for p in $(DEB_BENCH_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DTG_INDEX_PYTHON=$(TG_VENV)/bin/python3 $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# The pipelining tutorial's network on Fashion-MNIST, then the same network
# pipelined over 4 devices with a profile, and the report of that run.
# The tutorial's constant lr 0.001 was tuned for MNIST; on Fashion-MNIST 0.002
# with a cosine schedule reaches about 89.7% in 3 epochs (0.001: about 88.3%).
# It builds only the command (and the library in it), not the tests and benchmarks.
demo: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target tilegraph_cli
	./$(BUILD)/tilegraph train --model mnist-pipeline --epochs 3 --batch-size 40 \
	  --optimizer adamw --lr 0.002 --lr-schedule cosine --save $(BUILD)/mnist-pipeline.safetensors
	./$(BUILD)/tilegraph infer --model mnist-pipeline --load $(BUILD)/mnist-pipeline.safetensors --index 0
	rm -rf $(BUILD)/report
	./$(BUILD)/tilegraph train --model mnist-pipeline --load $(BUILD)/mnist-pipeline.safetensors \
	  --strategy pipelined --gradient-accumulation 10 --device-iterations 10 --batch-size 40 \
	  --optimizer adamw --lr 0.0005 --epochs 1 --train-limit 12000 \
	  --profile --profile-dir $(BUILD)/report
	./$(BUILD)/tilegraph analyse $(BUILD)/report trace
	./$(BUILD)/tilegraph report $(BUILD)/report -o report.html
	@echo "report: $$(pwd)/report.html (open it in a browser; it needs no network)"

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE heavy
	@$(MAKE) --no-print-directory test-isa

# The tests too long for every run (CTest label heavy: `tilegraph check` on
# every zoo model under every precision and loss scaling, BERT-large at its
# own size: about an hour of CPU and 11.6 GiB at the peak).
test-heavy: build
	cd $(BUILD) && ctest --output-on-failure -j 1 -L heavy

# The instruction-set-sensitive tests (CTest label isa: kernels, plans, memory
# figures, bf16) once more with every kernel held to AVX2 and to AVX-512
# without BF16 (TILEGRAPH_ISA, src/core/isa.h), so one AVX-512 machine tests
# the others' paths too. A set this CPU does not exceed is skipped (the suite
# itself ran it).
test-isa: build
	@for isa in avx2 avx512; do \
	  v=$$(TILEGRAPH_ISA=$$isa ./$(BUILD)/tilegraph --version); \
	  case "$$v" in *"kernels use $$isa (TILEGRAPH_ISA=$$isa; the CPU has $$isa)"*) ;; \
	  *"kernels use $$isa (TILEGRAPH_ISA=$$isa;"*) \
	    echo "test-isa: TILEGRAPH_ISA=$$isa"; \
	    (cd $(BUILD) && TILEGRAPH_ISA=$$isa ctest --output-on-failure -j $(JOBS) -L isa) || exit 1 ;; \
	  *) echo "test-isa: this CPU has no $$isa: skipped" ;; esac; \
	done

# The command, libtilegraph.a and .so, the headers and tilegraph.pc under
# $(DESTDIR)$(PREFIX): `cc prog.c $$(pkg-config --cflags --libs tilegraph)`.
install: build
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	DESTDIR=$(DESTDIR) cmake --install $(BUILD)
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi

bench: bench-deps build
	@for b in $(BUILD)/bench/bench_*; do $$b || exit 1; done

# docs/options.md's table from the library's option table (docs/options_table checks it).
options-doc: build
	python3 scripts/options_doc.py $(BUILD)/tilegraph docs/options.md --write

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Every C file as `make format` leaves it (CI runs this).
format-check: deps
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

# Sanitizer builds, each in its own directory.
asan: deps
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=address,undefined
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) -LE 'slow|docs|heavy'

tsan: deps
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DTG_SANITIZE=thread
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && TSAN_OPTIONS=suppressions=$(CURDIR)/tests/tsan.supp \
	  ctest --output-on-failure -j $(JOBS) -L threads

fuzz: deps
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DTG_FUZZ=ON
	cmake --build build-fuzz -j $(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
