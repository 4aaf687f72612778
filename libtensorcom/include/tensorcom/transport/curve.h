// CURVE security for Connections: encryption and authentication of every
// peer (ZeroMQ's CurveZMQ, elliptic-curve keys written in Z85 text), and the
// certificate files that hold the keys, in CZMQ's zcert format so that keys
// made by other ZeroMQ tools work here and ours there:
//
//   NAME          the public certificate: share it
//       metadata
//       curve
//           public-key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
//   NAME_secret   the secret certificate: public and secret key, mode 0600
//
// Roles: a CURVE server holds a key pair that its clients know the public
// half of; a client holds its own pair and the server's public key. In
// tensorcom the data servers (PUSH, PUB) are usually the CURVE servers and
// the trainers and tools (PULL, SUB) the clients, whichever side binds.
// See docs/security.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "tensorcom/codec/error.h"

namespace tensorcom {

// A CURVE key pair, each key 40 characters of Z85. secret_key is empty for
// a public certificate.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

// What a Connection needs to speak CURVE.
struct CurveSecurity {
  CurveKeyPair keys;              // this side's pair (secret_key required)
  std::string server_public_key;  // a client: the server's public key; empty: this side is the server
  // A server: the client public keys it accepts; a peer with any other key
  // is refused during the handshake, receives nothing and can send nothing.
  // Nothing: any client that knows the server's public key.
  std::optional<std::vector<std::string>> allowed_clients;
};

// Returns: a fresh key pair from the system's random source.
// Throws UnavailableError if this ZeroMQ was built without CURVE.
[[nodiscard]] CurveKeyPair generate_curve_keypair();

// Writes the pair as `path` (public, mode 0644) and `path`_secret (both
// keys, mode 0600, never readable by others even for a moment).
// Throws IoError if either exists already or cannot be written.
void write_curve_certificates(const std::filesystem::path& path, const CurveKeyPair& keys);

// Reads a certificate: public-key, and secret-key if it holds one. Keys are
// checked to be 40 characters of Z85 decoding to 32 bytes.
// Throws IoError if it cannot be read, FormatError naming the file and line
// if it is not a certificate.
[[nodiscard]] CurveKeyPair read_curve_certificate(const std::filesystem::path& path);

// Reads a secret certificate (as written by write_curve_certificates' _secret
// file). Throws as read_curve_certificate, and ArgumentError if it holds no
// secret key or is readable by group or others.
[[nodiscard]] CurveKeyPair read_curve_secret_certificate(const std::filesystem::path& path);

// The public keys of every certificate in `folder` (files whose names end
// in "_secret", and hidden files, are passed over), as CZMQ's zcertstore
// reads an allow-list. Throws IoError if the folder cannot be read,
// FormatError for a file that is not a certificate.
[[nodiscard]] std::vector<std::string> read_curve_public_keys(const std::filesystem::path& folder);

// Files naming a CurveSecurity, as the programs' --curve-secret,
// --curve-server and --curve-allow (and Python's curve_secret, curve_server,
// curve_allow) give them; empty: not given.
struct CurveFiles {
  std::string secret;  // this side's secret certificate
  std::string server;  // the server's public certificate: this side is a client
  std::string allow;   // a server's folder of allowed clients' public certificates
};

// Returns: nothing when no file is named; else the keys the files hold.
// Throws: ArgumentError for an incomplete or contradictory set (a server
//   certificate or an allow-list without a secret; an allow-list on a
//   client); IoError and FormatError from reading the files.
[[nodiscard]] std::optional<CurveSecurity> read_curve_security(const CurveFiles& files);

}  // namespace tensorcom
