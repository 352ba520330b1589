import assert from "node:assert/strict";
import { isPublicAddress } from "../../src/node/mod.ts";

Deno.test("isPublicAddress: private, loopback and link-local addresses and internal names are not public", () => {
  for (
    const url of [
      "http://127.0.0.1:8080",
      "http://10.0.0.11:8080",
      "http://172.16.3.4:8080",
      "http://172.31.255.1",
      "http://192.168.1.2:80",
      "http://169.254.1.1",
      "http://100.64.0.1",
      "http://[::1]:8080",
      "http://[fd00::1]:8080",
      "http://[fe80::1]:8080",
      "http://localhost:8080",
      "http://node-a:8080",
      "http://a.internal:8080",
      "http://db.local",
    ]
  ) assert.equal(isPublicAddress(url), false, url);
  for (
    const url of [
      "http://8.8.8.8:8080",
      "http://172.32.0.1",
      "http://[2001:db8::1]:8080",
      "http://node.example.com:8080",
    ]
  ) assert.equal(isPublicAddress(url), true, url);
});
