"""moto server with two DynamoDB emulator bugs and one Step Functions bug
worked around.

moto 5.2.5's TransactWriteItems backs up each table it touches with a deep
copy (items *and* the whole stream history) and, when the transaction is
cancelled, replaces the table object with that copy. Measured here, that
causes three failures real DynamoDB never shows:

1. Served on threads without a lock, the copy races concurrent writes and
   fails with "dictionary changed size during iteration": an HTML 500.
2. Replacing the table object orphans the stream shard that open shard
   iterators point at: after the first cancelled transaction a stream reader
   sees no new record, ever, and it does see the records the cancelled
   transaction wrote before it failed (phantom facts).
3. Each transaction costs a copy of the table's whole history: transactions
   grow slower, and memory grew past 10 GB in a test run.

This launcher serialises the DynamoDB and DynamoDB Streams backend behind one
lock, and replaces the backup with an in-place one: before the transaction it
remembers the items the transaction names and the stream's length; on
cancellation it puts those items back and truncates the stream, in the same
table object. Then it runs moto's own server entry point with its arguments.
SQS long polls and every other service stay concurrent.

S3: moto does not check a presigned URL's validity. AWS refuses a request
through one past its signing instant plus `X-Amz-Expires` (403
AccessDenied, "Request has expired"); the launcher does the same for the
object routes (puts, parts, gets), so an upload slower than its URLs fails
here as it would on AWS. Signatures themselves stay unchecked.

Step Functions: moto's SendTaskFailure handler drops the request's `cause`
(its execution engine takes one), so a `Catch` sees `"Cause": null` where
AWS gives the cause sent. The run-attempt state machine reads the next
task's timeout from that cause (service/src/usecases/orchestration.rs); the handler
below passes it on.
"""

import copy
import functools
import sys
import threading
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlparse

from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodbstreams.models import DynamoDBStreamsBackend
from moto.core.responses import EmptyResult
from moto.s3.exceptions import S3ClientError
from moto.s3.responses import S3Response
from moto.server import main
from moto.stepfunctions.responses import StepFunctionResponse

_LOCK = threading.RLock()

_DYNAMODB_OPERATIONS = [
    "create_table", "delete_table", "update_table", "describe_table",
    "put_item", "get_item", "update_item", "delete_item", "query", "scan",
    "transact_write_items", "transact_get_items", "batch_write_item", "batch_get_item",
]
_STREAM_OPERATIONS = ["describe_stream", "get_shard_iterator", "get_records", "list_streams"]


def _locked(function):
    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        with _LOCK:
            return function(*args, **kwargs)

    return wrapper


def _wrap(cls, names):
    for name in names:
        original = getattr(cls, name, None)
        if original is not None:
            setattr(cls, name, _locked(original))


_original_transact = DynamoDBBackend.transact_write_items


def _key_of(table, op_type, op):
    attrs = op["Item"] if op_type == "Put" else op["Key"]
    hash_value = DynamoType(attrs[table.hash_key_attr])
    range_value = DynamoType(attrs[table.range_key_attr]) if table.range_key_attr else None
    return hash_value, range_value


def _transact_in_place(self, transact_items):
    saved_items = []  # (table, hash, range, original Item or None)
    saved_streams = {}  # table name -> (table, stream length)
    try:
        for entry in transact_items:
            op_type, op = next(iter(entry.items()))
            table = self.tables.get(op.get("TableName"))
            if table is None or op_type not in {"Put", "Delete", "Update", "ConditionCheck"}:
                continue
            hash_value, range_value = _key_of(table, op_type, op)
            current = table.get_item(hash_value, range_value)
            if current is not None:
                # Updates mutate the stored item in place: keep the original
                # object aside and let the transaction work on a copy.
                fresh = copy.deepcopy(current)
                if range_value is not None:
                    table.items[hash_value][range_value] = fresh
                else:
                    table.items[hash_value] = fresh
            saved_items.append((table, hash_value, range_value, current))
            if table.stream_shard is not None and table.name not in saved_streams:
                saved_streams[table.name] = (table, len(table.stream_shard.items))
    except Exception:
        saved_items = None  # malformed request: let moto report it as it would
    try:
        return _original_transact(self, transact_items)
    except Exception:
        for table, hash_value, range_value, original in reversed(saved_items or []):
            if range_value is not None:
                table.items[hash_value].pop(range_value, None)
                if original is not None:
                    table.items[hash_value][range_value] = original
                elif not table.items[hash_value]:
                    table.items.pop(hash_value, None)
            else:
                table.items.pop(hash_value, None)
                if original is not None:
                    table.items[hash_value] = original
        for table, length in saved_streams.values():
            del table.stream_shard.items[length:]
        raise


# moto's own backup: a deep copy of the table. Ours is taken above, so the copy
# is the table itself and moto's rollback (assigning it back) changes nothing.
Table.__deepcopy__ = lambda self, memo: self
DynamoDBBackend.transact_write_items = _transact_in_place
_wrap(DynamoDBBackend, _DYNAMODB_OPERATIONS)
_wrap(DynamoDBStreamsBackend, _STREAM_OPERATIONS)



def _send_task_failure(self):
    self.stepfunction_backend.send_task_failure(
        self._get_param("taskToken"), error=self._get_param("error"), cause=self._get_param("cause")
    )
    return EmptyResult()


StepFunctionResponse.send_task_failure = _send_task_failure

class _RequestExpired(S3ClientError):
    def __init__(self):
        super().__init__("AccessDenied", "Request has expired")


_original_key_response = S3Response._key_response


def _key_response_unless_expired(self, request, full_url):
    query = parse_qs(urlparse(full_url).query)
    signed_at, valid_s = query.get("X-Amz-Date"), query.get("X-Amz-Expires")
    if signed_at and valid_s:
        signed = datetime.strptime(signed_at[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
        if datetime.now(timezone.utc) > signed + timedelta(seconds=int(valid_s[0])):
            raise _RequestExpired()
    return _original_key_response(self, request, full_url)


S3Response._key_response = _key_response_unless_expired

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
