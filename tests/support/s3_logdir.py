"""A log dir in an S3 bucket, served by a real S3-compatible server (moto's, on 127.0.0.1), read by the plugin
(issue 52: every file through one door, local or remote).

    python -m tests.support.s3_logdir LOCAL_LOGDIR OUT.json

uploads LOCAL_LOGDIR to ``s3://modelmem/logs``, points TensorBoard's filesystem layer (TensorFlow blocked: its
own filesystem reads no s3:// since TF 2.6, where TensorBoard's does, through boto3) at the server
(``S3_ENDPOINT``, read when that layer is imported: hence a fresh process), serves the bucket through the
plugin (``plugin_harness.Served``) and writes what each PyTorch item answered: ``{tag: {"status", "body"}}``.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(local: str, out: str) -> None:
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    os.environ.update(S3_ENDPOINT=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                      AWS_DEFAULT_REGION="us-east-1")
    try:
        import boto3

        client = boto3.client("s3", endpoint_url=os.environ["S3_ENDPOINT"])
        client.create_bucket(Bucket="modelmem")
        for folder, _, names in os.walk(local):
            for name in names:
                path = os.path.join(folder, name)
                client.upload_file(path, "modelmem", "logs/" + os.path.relpath(path, local).replace(os.sep, "/"))
        from tests.support.plugin_harness import Served

        served = Served("s3://modelmem/logs")
        answers = {}
        for run, tag in served.tags():
            route = "/breakdown" if tag.endswith((".pt", "/")) else "/ops"
            answer = served.settled(route, run=run, tag=tag)
            answers[tag] = {"run": run, "status": answer.status_code, "body": answer.get_data(as_text=True)}
        with open(out, "w") as f:
            json.dump(answers, f)
    finally:
        server.stop()


if __name__ == "__main__":
    from tests.support import no_tensorflow

    no_tensorflow.block()  # TensorFlow's own filesystem has no s3://; without it TensorBoard uses its own layer
    main(sys.argv[1], sys.argv[2])
