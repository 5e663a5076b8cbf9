#!/usr/bin/env python3
"""A stand-in for Google, to try Google sign-in without Google (standard library only).

It makes an RSA key, serves its public half as a JWKS the way Google does, and mints ID tokens
signed with it (RS256), so a client developer can exercise POST /v1/auth/google locally:

    python3 Tools/fake_google.py --client-id dev-client --port 8081
    GOOGLE_CLIENT_IDS=dev-client GOOGLE_JWKS_URL=http://127.0.0.1:8081/certs make run
    curl -s 'http://127.0.0.1:8081/token?email=ada@example.org'      # an ID token
    curl -s 'http://127.0.0.1:8081/token?email=ada@example.org&email_verified=false'

Query parameters of /token: email, sub (default: derived from the email), name,
email_verified (true), aud (the --client-id), ttl (seconds, 3600). Never use it in production.
"""
import argparse
import base64
import hashlib
import json
import random
import secrets
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def probable_prime(bits: int) -> int:
    rng = random.SystemRandom()
    while True:
        # The top two bits set, so the product of two has exactly twice the bits (2048: the
        # least RSA key verifiers accept).
        candidate = rng.getrandbits(bits) | (3 << bits - 2) | 1
        if all(candidate % p for p in (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)) and miller_rabin(candidate, rng):
            return candidate


def miller_rabin(n: int, rng, rounds: int = 40) -> bool:
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(rounds):
        x = pow(rng.randrange(2, n - 1), d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


class Key:
    """RSA-2048 with e = 65537; signs PKCS#1 v1.5 over SHA-256 (what RS256 is)."""

    DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")

    def __init__(self):
        self.e = 65537
        while True:
            p, q = probable_prime(1024), probable_prime(1024)
            phi = (p - 1) * (q - 1)
            if p != q and phi % self.e:
                break
        self.n, self.d = p * q, pow(self.e, -1, phi)
        self.kid = secrets.token_hex(8)

    def sign(self, message: bytes) -> bytes:
        size = (self.n.bit_length() + 7) // 8
        t = self.DIGEST_INFO + hashlib.sha256(message).digest()
        padded = b"\x00\x01" + b"\xff" * (size - len(t) - 3) + b"\x00" + t
        return pow(int.from_bytes(padded, "big"), self.d, self.n).to_bytes(size, "big")

    def jwks(self) -> dict:
        return {"keys": [{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": self.kid,
                          "n": b64url(int_bytes(self.n)), "e": b64url(int_bytes(self.e))}]}

    def token(self, claims: dict) -> str:
        header = b64url(json.dumps({"alg": "RS256", "kid": self.kid, "typ": "JWT"}).encode())
        body = b64url(json.dumps(claims).encode())
        return f"{header}.{body}.{b64url(self.sign(f'{header}.{body}'.encode()))}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--client-id", required=True, help="the GOOGLE_CLIENT_IDS value the server is started with")
    parser.add_argument("--port", type=int, default=8081)
    args = parser.parse_args()
    key = Key()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            url = urlparse(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path == "/certs":
                self.reply(json.dumps(key.jwks()), "application/json", cache="public, max-age=3600")
            elif url.path == "/token" and "email" in query:
                now = int(time.time())
                email = query["email"]
                claims = {"iss": "https://accounts.google.com", "azp": query.get("aud", args.client_id),
                          "aud": query.get("aud", args.client_id),
                          "sub": query.get("sub", str(int(hashlib.sha256(email.lower().encode()).hexdigest(), 16))[:21]),
                          "email": email, "email_verified": query.get("email_verified", "true") == "true",
                          "name": query.get("name", email.split("@")[0]), "iat": now, "exp": now + int(query.get("ttl", "3600"))}
                self.reply(key.token(claims) + "\n", "text/plain")
            else:
                self.reply("GET /certs, or GET /token?email=...\n", "text/plain", status=404)

        def reply(self, body, content_type, status=200, cache="no-store"):
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Cache-Control", cache)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    print(f"fake Google on http://127.0.0.1:{args.port}: keys at /certs, tokens at /token?email=...", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
