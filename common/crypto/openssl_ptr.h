// Owning pointers for the OpenSSL objects the project holds: one deleter per
// type, each calling that type's own OpenSSL free function. common/crypto and
// common/jwt both use these; a new OpenSSL type gets its alias here, not a
// deleter of its own next to the code that needs it.
#pragma once

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/params.h>

#include <memory>

namespace ulticode::crypto {

// Frees a T with `Free` (OpenSSL's free functions accept null).
template <typename T, auto Free>
struct OpensslDeleter {
  void operator()(T* p) const { Free(p); }
};

template <typename T, auto Free>
using OpensslPtr = std::unique_ptr<T, OpensslDeleter<T, Free>>;

// OPENSSL_free is a macro (it records file and line): a function to point to.
inline void OpensslFree(void* p) { OPENSSL_free(p); }

using EvpPkeyPtr = OpensslPtr<EVP_PKEY, &EVP_PKEY_free>;
using EvpPkeyCtxPtr = OpensslPtr<EVP_PKEY_CTX, &EVP_PKEY_CTX_free>;
using EvpMdCtxPtr = OpensslPtr<EVP_MD_CTX, &EVP_MD_CTX_free>;
using BioPtr = OpensslPtr<BIO, &BIO_free>;
using BignumPtr = OpensslPtr<BIGNUM, &BN_free>;
using EcdsaSigPtr = OpensslPtr<ECDSA_SIG, &ECDSA_SIG_free>;
using OsslParamBldPtr = OpensslPtr<OSSL_PARAM_BLD, &OSSL_PARAM_BLD_free>;
using OsslParamPtr = OpensslPtr<OSSL_PARAM, &OSSL_PARAM_free>;
// Bytes OpenSSL allocated for the caller (the output of i2d_*).
using OpensslBytesPtr = OpensslPtr<unsigned char, &OpensslFree>;

}  // namespace ulticode::crypto
