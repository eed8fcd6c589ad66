// Text a client controls (request fields, tokens-file lines): the rules it is held to, and how a
// message quotes it. One place for both, so a log line or reply that quotes client text stays a
// few hundred bytes whatever was sent.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace attn::server {

// A name: 1..max_bytes of A-Z a-z 0-9 . _ - (participants in the tokens file, client_id).
bool IsName(absl::string_view text, size_t max_bytes);

// Valid UTF-8 (no overlong forms, surrogates or values past U+10FFFF) without C0 or C1 control
// characters or DEL.
bool IsPrintableUtf8(absl::string_view text);

// `text` for a message: quoted, control characters, quotes and backslashes escaped (\xNN), cut
// to its first 48 bytes with the full size after ("'abc...' (20971520 bytes)").
std::string Quoted(absl::string_view text);

}  // namespace attn::server
