#!/usr/bin/env bash
# Start a distributed Connect worker from the apache/kafka image with the FileStream connectors loadable.
#
# Why a copy: the image ships connect-file-<version>.jar in /opt/kafka/libs, but kafka-run-class.sh
# leaves it off the classpath (KAFKA-13748, Kafka 3.2), and pointing plugin.path at /opt/kafka/libs
# would make Connect scan every Kafka jar as a plugin. Copying the jar into its own plugin directory
# keeps plugin.path version-independent, so a different KAFKA_IMAGE tag still works.
set -euo pipefail

plugins=/tmp/connect-plugins/connect-file
mkdir -p "$plugins"
shopt -s nullglob
jars=(/opt/kafka/libs/connect-file-*.jar)
if (( ${#jars[@]} == 0 )); then
  echo "start-connect: no connect-file-*.jar in /opt/kafka/libs; FileStream connectors unavailable" >&2
  exit 1
fi
cp "${jars[@]}" "$plugins/"
echo "start-connect: FileStream plugin from ${jars[*]}"

exec /opt/kafka/bin/connect-distributed.sh /etc/connect/connect-distributed.properties
