#include "cli/store_common.hpp"


namespace archbuild::cli {

void add_store_options(CLI::App& cmd, StoreArgs& args, bool pushes) {
  cmd.add_option("--store", args.url,
                 pushes ? "Shared build store on an OCI registry, oci://HOST[:PORT]/REPOSITORY (oci+http:// for one without "
                          "TLS): the key is pulled from it when there, pushed to it after a validated build (default: "
                          "$ARCHBUILD_STORE; docs/store.md)"
                        : "Shared build store on an OCI registry, oci://HOST[:PORT]/REPOSITORY: whether it has the key "
                          "(default: $ARCHBUILD_STORE)");
  cmd.add_flag("--store-required", args.required,
               "A store that cannot be reached fails the command (exit 3) instead of a warning and a local build "
               "(default: $ARCHBUILD_STORE_REQUIRED=1)");
  if (pushes)
    cmd.add_option("--store-sign-key", args.sign_key,
                   "Ed25519 or ECDSA P-256 private key (PEM) that signs what is pushed (default: $ARCHBUILD_STORE_SIGN_KEY)");
  cmd.add_option("--store-trust", args.trust,
                 "Ed25519 or ECDSA P-256 public keys (PEM): a pulled result must be signed by one of them, else it is not used "
                 "(default: $ARCHBUILD_STORE_TRUST, comma-separated)")
      ->delimiter(',');
}

}  // namespace archbuild::cli
