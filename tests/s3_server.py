"""An S3-compatible server on loopback for the object-storage tests: moto's, with request
signatures checked (SigV4, against its IAM users), conditional puts (`If-None-Match: *`) and
multipart uploads as S3 does them.

    python tests/s3_server.py serve BUCKET...
        Starts the server on a free port of 127.0.0.1 and creates the buckets; prints one JSON
        line (port, the keys of a user who may do anything, the keys of one who may only read)
        and serves until stdin closes.

    python tests/s3_server.py dump ENDPOINT KEY SECRET BUCKET DIR
        Writes every object of BUCKET into DIR (by its name) and prints one JSON line: the
        objects and the multipart uploads still open.

    python tests/s3_server.py put ENDPOINT KEY SECRET BUCKET NAME BYTES
        Puts the object NAME holding BYTES (text), over what is there.
"""

import json
import os
import sys


def serve(buckets):
    # The first requests (the users and their keys, below) are let through unsigned; every
    # one after is checked.
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "6"
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port
    iam = boto3.client(
        "iam",
        endpoint_url=f"http://127.0.0.1:{port}",
        region_name="us-east-1",
        aws_access_key_id="setup",
        aws_secret_access_key="setup",
    )

    def user(name, actions):
        iam.create_user(UserName=name)
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        }
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return key["AccessKeyId"], key["SecretAccessKey"]

    writer = user("writer", "*")
    reader = user("reader", ["s3:GetObject", "s3:ListBucket"])
    s3 = client(f"http://127.0.0.1:{port}", *writer)
    for bucket in buckets:
        s3.create_bucket(Bucket=bucket)
    print(
        json.dumps(
            {
                "port": port,
                "key": writer[0],
                "secret": writer[1],
                "read_only_key": reader[0],
                "read_only_secret": reader[1],
            }
        ),
        flush=True,
    )
    sys.stdin.read()
    server.stop()


def client(endpoint, key, secret):
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key,
        aws_secret_access_key=secret,
    )


def dump(endpoint, key, secret, bucket, folder):
    s3 = client(endpoint, key, secret)
    objects = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            name = item["Key"]
            target = os.path.join(folder, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            s3.download_file(bucket, name, target)
            objects.append(name)
    uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    print(json.dumps({"objects": objects, "open_uploads": len(uploads)}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2:])
    elif sys.argv[1:2] == ["dump"] and len(sys.argv) == 7:
        dump(*sys.argv[2:])
    elif sys.argv[1:2] == ["put"] and len(sys.argv) == 8:
        endpoint, key, secret, bucket, name, body = sys.argv[2:]
        client(endpoint, key, secret).put_object(Bucket=bucket, Key=name, Body=body.encode())
    else:
        sys.exit(__doc__)
