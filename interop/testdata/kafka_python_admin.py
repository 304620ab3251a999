"""A kafka-python (Debian's python3-kafka) KafkaAdminClient driven over
stdin/stdout by the interop tests: one JSON command per line in, one JSON
answer per line out. Kafka error codes come back as "errno" so the Go side
compares codes, not Python class names.

Usage: kafka_python_admin.py host:port[,host:port...]
"""
import json
import sys

from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import KafkaError


def first_error(pairs):
    """The first non-zero (code, message) in a response's per-topic list of
    (topic, code[, message]) tuples."""
    for item in pairs:
        code = item[1]
        msg = item[2] if len(item) > 2 else None
        if code != 0:
            return {"errno": code, "error": msg or ""}
    return {}


def brokers(adm, _cmd):
    md = adm.describe_cluster()
    return {
        "brokers": sorted(b["node_id"] for b in md["brokers"]),
        "controller_id": md.get("controller_id", -1),
        "cluster_id": md.get("cluster_id"),
    }


def create_topic(adm, cmd):
    topic = NewTopic(name=cmd["topic"], num_partitions=cmd["partitions"],
                     replication_factor=cmd["replication_factor"])
    resp = adm.create_topics([topic], timeout_ms=10000)
    return first_error(resp.topic_errors)


def leaders(adm, cmd):
    for t in adm.describe_topics():  # no names: every topic
        if t["topic"] != cmd["topic"]:
            continue
        if t["error_code"] != 0:
            return {"errno": t["error_code"], "error": "topic error"}
        return {"found": True,
                "leaders": {str(p["partition"]): p["leader"] for p in t["partitions"]}}
    return {"found": False}


def create_partitions(adm, cmd):
    resp = adm.create_partitions({cmd["topic"]: NewPartitions(total_count=cmd["total"])},
                                 timeout_ms=10000)
    return first_error(resp.topic_errors)


def delete_topic(adm, cmd):
    resp = adm.delete_topics([cmd["topic"]], timeout_ms=10000)
    return first_error(resp.topic_error_codes)


OPS = {
    "brokers": brokers,
    "create_topic": create_topic,
    "leaders": leaders,
    "create_partitions": create_partitions,
    "delete_topic": delete_topic,
}


def main():
    adm = KafkaAdminClient(bootstrap_servers=sys.argv[1].split(","),
                           client_id="interop-kafka-python", request_timeout_ms=10000)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            out = OPS[cmd["op"]](adm, cmd)
        except KafkaError as e:
            out = {"errno": getattr(e, "errno", -1), "error": repr(e)}
        except Exception as e:  # report, keep serving: one bad step is not fatal
            out = {"errno": -1, "error": repr(e)}
        print(json.dumps(out), flush=True)
    adm.close()


if __name__ == "__main__":
    main()
