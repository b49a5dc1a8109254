#!/usr/bin/env python3
"""bench/moto_latency.py PORT LATENCY_MS - the moto S3 server on
127.0.0.1:PORT answering every request LATENCY_MS later, as a stand-in for
the round trip to a real S3 region (loopback has none, so without it a
benchmark measures moto's speed, not what parallel requests save).
Requests are served on threads, so delays of concurrent requests overlap
as they would over a network."""

import sys
import time

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple


class Delay:
    def __init__(self, app, seconds):
        self.app, self.seconds = app, seconds

    def __call__(self, environ, start_response):
        time.sleep(self.seconds)
        return self.app(environ, start_response)


def main():
    port, ms = int(sys.argv[1]), float(sys.argv[2])
    app = DomainDispatcherApplication(create_backend_app)
    run_simple("127.0.0.1", port, Delay(app, ms / 1000.0), threaded=True)


if __name__ == "__main__":
    main()
