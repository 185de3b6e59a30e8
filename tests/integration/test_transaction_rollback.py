"""moto's TransactWriteItems in the embedded AWS rolls back the items it touched (it keeps copies
of those items, not of whole tables: batchpilot_local.emulator.patch.cheap_transaction_rollback)."""

from __future__ import annotations

import pytest
from batchpilot_local.embedded_aws import EmbeddedAws
from botocore.exceptions import ClientError

TABLE = "t"


def _item(pk: str, value: str) -> dict[str, dict[str, str]]:
    return {"pk": {"S": pk}, "v": {"S": value}}


def test_a_cancelled_transaction_leaves_every_item_as_it_was() -> None:
    with EmbeddedAws() as aws:
        dynamodb = aws.client("dynamodb")
        dynamodb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        )
        dynamodb.put_item(TableName=TABLE, Item=_item("kept", "before"))
        dynamodb.put_item(TableName=TABLE, Item=_item("other", "untouched"))

        with pytest.raises(ClientError) as error:
            dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": _item("kept", "after")}},
                    {"Put": {"TableName": TABLE, "Item": _item("new", "x")}},
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": {"pk": {"S": "other"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                ]
            )

        assert error.value.response["Error"]["Code"] == "TransactionCanceledException"
        items = {i["pk"]["S"]: i["v"]["S"] for i in dynamodb.scan(TableName=TABLE)["Items"]}
        assert items == {"kept": "before", "other": "untouched"}

        dynamodb.transact_write_items(
            TransactItems=[{"Put": {"TableName": TABLE, "Item": _item("kept", "after")}}]
        )
        assert dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "kept"}})["Item"]["v"]["S"] == "after"
