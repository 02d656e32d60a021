# Conveniences over the scripts in scripts/, for people who expect `make install`.
#
#   make install PREFIX=/usr/local    release build, then bin/browserdrop and its docs under PREFIX
#   make install DESTDIR=/tmp/pkg     stages the same files for a package
#   make uninstall PREFIX=/usr/local  removes what install put there
#   make test                         the whole test suite (what .ci/run runs)

PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: install uninstall test

install:
	PREFIX='$(PREFIX)' DESTDIR='$(DESTDIR)' scripts/install.sh

uninstall:
	rm -f '$(DESTDIR)$(PREFIX)/bin/browserdrop'
	rm -rf '$(DESTDIR)$(PREFIX)/share/doc/browserdrop'

test:
	scripts/test.sh
