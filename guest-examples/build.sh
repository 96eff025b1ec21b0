#!/usr/bin/env sh
# Rebuild the guests for wasm32-wasip2 and refresh the copies that the
# bundled example skills ship (the README's run command serves them as is).
set -eu
cd "$(dirname "$0")"
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
cargo build --release --target wasm32-wasip2
out=target/wasm32-wasip2/release
skills=workspace/.agents/skills
cp "$out/word-count.wasm" "$skills/text-stats/components/word-count.wasm"
cp "$out/data-reader.wasm" "$skills/text-stats/components/file-stats.wasm"
cp "$out/greeter.wasm" "$skills/hello-typed/components/greeter.wasm"
cp "$out/spin.wasm" "$skills/limits-demo/components/spin.wasm"
cp "$out/memory_bomb.wasm" "$skills/limits-demo/components/memory-bomb.wasm"
echo "refreshed the bundled components"
