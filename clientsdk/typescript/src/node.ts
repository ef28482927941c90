// A Node transport for the Client: gRPC over HTTP/2 straight to the gRPC
// address (serve --grpc-addr), or the Connect protocol over HTTP/1.1 or
// HTTP/2 to the HTTP address, with Node's own http2 (connect-node).

import { webcrypto } from "node:crypto";

import type { Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

// Node 18 has Web Crypto only as require("node:crypto").webcrypto; the
// client makes operator calls' keys with globalThis.crypto.
if (!globalThis.crypto) {
  Object.defineProperty(globalThis, "crypto", { value: webcrypto, configurable: true });
}

/** grpcTransport speaks gRPC to baseUrl, the gRPC address ("http://127.0.0.1:7070"). */
export function grpcTransport(baseUrl: string): Transport {
  return createGrpcTransport({ baseUrl });
}

/** connectTransport speaks the Connect protocol to baseUrl, the HTTP address, over HTTP/1.1. */
export function connectTransport(baseUrl: string): Transport {
  return createConnectTransport({ baseUrl, httpVersion: "1.1" });
}
