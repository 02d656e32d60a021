#ifndef C_CRYPTO_SHIM_H
#define C_CRYPTO_SHIM_H
/* OpenSSL's digest API (libcrypto, Debian package libssl-dev): SHA-256 for delivery checks. */
#include <openssl/evp.h>
#endif
