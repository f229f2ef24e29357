# shellcheck shell=bash
# Shared by hack/images.sh and hack/vm.sh (sourced, not run): where
# debootstrap fetches Debian from.

# debian_mirror SUITE: DEBIAN_MIRROR, else the first URI apt uses for SUITE
# (deb822 .sources stanzas or one-line .list entries); an error on stderr
# when there is none.
debian_mirror() {
  local suite=$1 f m
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    echo "${DEBIAN_MIRROR}"
    return
  fi
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "${f}" ] || continue
    case "${f}" in
      *.sources)
        m=$(awk -v suite="${suite}" '
          function flush() { if (!done && uri != "" && ok && deb) { print uri; done = 1; exit } uri = ""; ok = 0; deb = 0 }
          /^[[:space:]]*$/ { flush(); next }
          /^Types:/ { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
          /^URIs:/ { uri = $2 }
          /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
          END { flush() }' "${f}") ;;
      *)
        m=$(awk -v suite="${suite}" '
          $1 == "deb" { for (i = 2; i < NF; i++) if ($i !~ /^\[/ && $(i + 1) == suite) { print $i; exit } }' "${f}") ;;
    esac
    if [ -n "${m}" ]; then
      echo "${m}"
      return
    fi
  done
  echo "ERROR: no ${suite} mirror in /etc/apt/sources.list*; set DEBIAN_MIRROR" >&2
  return 1
}
