# Installs libcmwq, the kernel's workqueue API in C (crates/cmwq-capi), as a
# C library:
#   make install PREFIX=$HOME/.local      (DESTDIR too; default /usr/local)
#   make uninstall PREFIX=...
# then: cc prog.c $(pkg-config --cflags --libs cmwq). It builds in release
# (cargo) and installs:
#   lib/libcmwq.so.X.Y.Z (SONAME libcmwq.so.X, stripped), the links
#   libcmwq.so.X and libcmwq.so, lib/.debug/libcmwq.so.X.Y.Z.debug (its
#   debug information, found by gdb through a debuglink), lib/libcmwq.a
#   (debug information stripped), include/cmwq/linux/*.h and
#   include/cmwq/kcompat/linux/*.h, lib/pkgconfig/cmwq.pc.
PREFIX ?= /usr/local
DESTDIR ?=
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
CARGO ?= cargo
STRIP ?= strip
OBJCOPY ?= objcopy
TARGET_DIR ?= $(or $(CARGO_TARGET_DIR),target)
CAPI := crates/cmwq-capi
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' Cargo.toml | head -1)
MAJOR := $(firstword $(subst ., ,$(VERSION)))
SO := libcmwq.so.$(VERSION)
BUILT := $(TARGET_DIR)/release
D := $(DESTDIR)$(LIBDIR)
I := $(DESTDIR)$(INCLUDEDIR)/cmwq

.PHONY: all lib install uninstall
all: lib

lib:
	$(CARGO) build --release -p cmwq-capi

install: lib
	install -d $(D)/pkgconfig $(D)/.debug $(I)
	$(OBJCOPY) --only-keep-debug $(BUILT)/libcmwq_capi.so $(D)/.debug/$(SO).debug
	$(STRIP) --strip-unneeded -o $(D)/$(SO).tmp $(BUILT)/libcmwq_capi.so
	cd $(D) && $(OBJCOPY) --add-gnu-debuglink=.debug/$(SO).debug $(SO).tmp && mv -f $(SO).tmp $(SO)
	ln -sfn $(SO) $(D)/libcmwq.so.$(MAJOR)
	ln -sfn libcmwq.so.$(MAJOR) $(D)/libcmwq.so
	$(STRIP) --strip-debug -o $(D)/libcmwq.a $(BUILT)/libcmwq_capi.a
	cp -R $(CAPI)/include/linux $(CAPI)/include/kcompat $(I)/
	printf '%s\n' \
	    'prefix=$(PREFIX)' \
	    'libdir=$(LIBDIR)' \
	    'includedir=$(INCLUDEDIR)' \
	    '' \
	    'Name: cmwq' \
	    "Description: the Linux kernel's workqueue API in user space (linux/workqueue.h), over cmwq" \
	    'Version: $(VERSION)' \
	    'Cflags: -I$${includedir}/cmwq -I$${includedir}/cmwq/kcompat' \
	    'Libs: -L$${libdir} -lcmwq' \
	    'Libs.private: $(shell cat $(CAPI)/scripts/static-libs)' \
	    >$(D)/pkgconfig/cmwq.pc

uninstall:
	rm -f $(D)/$(SO) $(D)/libcmwq.so.$(MAJOR) $(D)/libcmwq.so $(D)/libcmwq.a \
	    $(D)/.debug/$(SO).debug $(D)/pkgconfig/cmwq.pc
	rm -rf $(I)
