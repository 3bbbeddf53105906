# Finds the Python of the serving runtime (3.12 or newer), for run/setup_serve.sh and
# run/lock_serve.sh (sourced; defines ldr_serve_python, which prints its path).
#
# In this order: $LDR_SERVE_PYTHON if set; python3.12, python3.13 and python3 on PATH (a
# pyenv shim that names a version not selected fails to run and is skipped); then pyenv's
# installed versions, $(pyenv root)/versions/3.12*/bin/python, then 3.13 and newer. The
# first that runs and is 3.12 or newer is used (the lock is made and tested with 3.12). None found:
# install one (pyenv install 3.12, or your system's python3.12 package) or set
# LDR_SERVE_PYTHON=/path/to/python3.12.
ldr_serve_python() {
  local candidate
  local candidates=()
  if [ -n "${LDR_SERVE_PYTHON:-}" ]; then
    candidates+=("$LDR_SERVE_PYTHON")
  fi
  for candidate in python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then
      candidates+=("$(command -v "$candidate")")
    fi
  done
  local pyenv_root=""
  if command -v pyenv >/dev/null 2>&1; then
    pyenv_root="$(pyenv root 2>/dev/null || true)"
  fi
  pyenv_root="${pyenv_root:-${PYENV_ROOT:-$HOME/.pyenv}}"
  if [ -d "$pyenv_root/versions" ]; then
    while IFS= read -r candidate; do
      candidates+=("$candidate")
    done < <(
      ls -d "$pyenv_root"/versions/3.12*/bin/python 2>/dev/null | sort -rV
      ls -d "$pyenv_root"/versions/3.1[3-9]*/bin/python 2>/dev/null | sort -V
    )
  fi
  for candidate in "${candidates[@]}"; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      echo "$candidate"
      return 0
    fi
  done
  echo "[serve] no Python 3.12 or newer found (tried LDR_SERVE_PYTHON, python3.13, python3.12 and python3 on PATH, and $pyenv_root/versions/3.12*): install one (e.g. pyenv install 3.12) or set LDR_SERVE_PYTHON=/path/to/python3.12" >&2
  return 1
}
