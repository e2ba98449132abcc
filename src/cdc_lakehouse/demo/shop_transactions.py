"""The shop workload's transaction kinds: each builds one transaction's row operations on a
private copy of the tables (``Builder``) and says whether it applies (False: try another).

``TransactionKinds`` is the simulator's (``shop_simulation.Simulator``) half that decides what a
transaction does; the other half decides when it runs, who runs it and how it ends.
"""

from __future__ import annotations

import random
from decimal import Decimal
from cdc_lakehouse.contract.lines import iso_s

from .shop_model import (BASE_COLUMNS, CITIES, FIRST_NAMES, LAST_NAMES, NEXT_STATUS, ORDER_42, PRODUCT_NAMES,
                         SCHEDULER, SEC, TIERS, RowOp, key_of, money)

class Builder:
    """One transaction's work on a private copy of the tables."""

    def __init__(self, gen: TransactionKinds, t0: int):
        self.gen = gen
        self.rng = gen.rng
        self.work = {name: dict(rows) for name, rows in gen.tables.items()}
        self.ops: list[RowOp] = []
        self.t = t0
        self._stmt = 0
        self.user: str | None = None
        self.label = ""
        self.no_rollback = False
        self.created_42 = False

    def tick(self) -> int:
        self.t += self.rng.randint(300, 8000)
        return self.t

    def row(self, table: str, **values) -> dict:
        cols = self.gen.columns(table)
        if table == "customers" and "phone" in cols:
            values.setdefault("phone", None)
        assert set(values) == set(cols), (table, sorted(values), cols)
        return {c: values[c] for c in cols}

    def insert(self, table: str, rows: list[dict]) -> None:
        self._stmt += 1
        for r in rows:
            k = key_of(table, r)
            assert k not in self.work[table], (table, k)
            self.work[table][k] = r
            self.ops.append(RowOp(table, "insert", None, r, self.tick(), self._stmt))

    def update(self, table: str, changes: list[tuple[tuple, dict]]) -> None:
        self._stmt += 1
        for k, ch in changes:
            before = self.work[table][k]
            after = dict(before)
            after.update(ch)
            assert after != before, (table, k, ch)
            nk = key_of(table, after)
            if nk != k:
                assert nk not in self.work[table], (table, nk)
                del self.work[table][k]
            self.work[table][nk] = after
            self.ops.append(RowOp(table, "update", before, after, self.tick(), self._stmt))

    def delete(self, table: str, keys: list[tuple]) -> None:
        self._stmt += 1
        for k in keys:
            before = self.work[table].pop(k)
            self.ops.append(RowOp(table, "delete", before, None, self.tick(), self._stmt))

    def keys(self, table: str) -> list[tuple]:
        return sorted(self.work[table])

    def items_of(self, order_id: int) -> list[dict]:
        return [self.work["order_items"][k] for k in self.keys("order_items") if k[0] == order_id]

    def order_total(self, order_id: int) -> Decimal:
        return money(sum((it["price"] * it["qty"] for it in self.items_of(order_id)), Decimal("0")))

    def set_total(self, order_id: int) -> None:
        total = self.order_total(order_id)
        if self.work["orders"][(order_id,)]["total"] != total:
            self.update("orders", [((order_id,), {"total": total})])


RANDOM_KINDS = (
    ("place_order", 30),
    ("advance", 20),
    ("edit", 8),
    ("cancel", 5),
    ("customer_update", 10),
    ("signup", 7),
    ("etl", 6),
    ("purge", 3),
    ("renumber", 1),
    ("delete_customer", 2),
)


class TransactionKinds:
    """The ``_k_<kind>`` builders; state (ids, tables, phone column) lives in the simulator."""

    rng: random.Random
    seed: int
    has_phone: bool
    next_ids: dict[str, int]
    pair_target: tuple[str, tuple] | None
    tables: dict[str, dict[tuple, dict]]  # the committed state

    def columns(self, table: str) -> tuple[str, ...]:
        """The table's columns now: ``customers`` gains ``phone`` with the DDL."""
        cols = BASE_COLUMNS[table]
        if table == "customers" and self.has_phone:
            cols = cols + ("phone",)
        return cols

    def _email(self, name: str) -> str:
        first, last = name.lower().split(" ", 1)
        table = str.maketrans({"é": "e", "ø": "o", "ë": "e", "ü": "u", "í": "i", "á": "a"})
        return f"{first.translate(table)}.{last.translate(table)}{self.rng.randint(1, 99)}@example.com"

    def _phone(self) -> str:
        return f"+49-30-{self.rng.randint(1000000, 9999999)}"

    def _k_load_products(self, b: Builder) -> bool:
        b.user = "etl"
        rows = []
        for n, pname in enumerate(PRODUCT_NAMES, 1):
            pid = self.next_ids["products"]
            self.next_ids["products"] += 1
            price = money(Decimal(self.rng.randint(250, 9999)) / 100)
            rows.append(b.row("products", product_id=pid, sku=f"SKU-{1000 + pid}", name=pname,
                              price=price, stock=self.rng.randint(40, 200)))
        b.insert("products", rows[:12])
        b.insert("products", rows[12:])
        return True

    def _k_load_customers(self, b: Builder) -> bool:
        b.user = "etl"
        rows = []
        for _ in range(30):
            cid = self.next_ids["customers"]
            self.next_ids["customers"] += 1
            name = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
            rows.append(b.row("customers", customer_id=cid, name=name, email=self._email(name),
                              city=self.rng.choice(CITIES), tier=self.rng.choice(TIERS[:3])))
        b.insert("customers", rows)
        return True

    def _k_place_order(self, b: Builder, user: str | None = None) -> bool:
        rng = self.rng
        custs = b.keys("customers")
        prods = [k for k in b.keys("products") if b.work["products"][k]["stock"] >= 3]
        if not custs or len(prods) < 4:
            return False
        oid = self.next_ids["orders"]
        self.next_ids["orders"] += 1  # auto-increment values are consumed even on rollback
        if oid == ORDER_42:
            b.user, b.no_rollback, b.created_42 = "alice", True, True
        else:
            b.user = user or rng.choice(["alice", "bob"])
        cust = rng.choice(custs)[0]
        chosen = rng.sample(prods, rng.choice([1, 2, 2, 3, 3, 4]))
        items = []
        for line, pk in enumerate(chosen, 1):
            p = b.work["products"][pk]
            items.append(b.row("order_items", order_id=oid, line_no=line, product_id=pk[0],
                               qty=rng.randint(1, 3), price=p["price"]))
        total = money(sum((it["price"] * it["qty"] for it in items), Decimal("0")))
        two_step = rng.random() < 0.25  # insert with total 0, set the total at the end
        b.insert("orders", [b.row("orders", order_id=oid, customer_id=cust, status="new",
                                  total=Decimal("0.00") if two_step else total,
                                  created_at=iso_s(b.t // SEC))])
        b.insert("order_items", items)
        for it in items:
            pk = (it["product_id"],)
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - it["qty"]})])
        if two_step:
            b.update("orders", [((oid,), {"total": total})])
        return True

    def _k_rollback_order(self, b: Builder) -> bool:
        if self.next_ids["orders"] == ORDER_42:  # order 42 must exist
            b.label = "customer_update"
            return self._k_customer_update(b)
        b.label = "place_order"
        return self._k_place_order(b)

    def _orders(self, b: Builder, statuses: tuple[str, ...], min_items: int = 0) -> list[tuple]:
        out = []
        for k in b.keys("orders"):
            if k[0] == ORDER_42 or b.work["orders"][k]["status"] not in statuses:
                continue
            if min_items and len(b.items_of(k[0])) < min_items:
                continue
            out.append(k)
        return out

    def _k_advance(self, b: Builder) -> bool:
        cands = self._orders(b, tuple(NEXT_STATUS))
        if not cands:
            return False
        k = self.rng.choice(cands)
        b.user = self.rng.choice(["alice", "bob"])
        steps = 2 if (self.rng.random() < 0.2 and b.work["orders"][k]["status"] != "shipped") else 1
        for _ in range(steps):  # e.g. paid then shipped in one transaction: UPDATE + UPDATE
            b.update("orders", [(k, {"status": NEXT_STATUS[b.work["orders"][k]["status"]]})])
        return True

    def _k_pair(self, b: Builder, user: str, first: bool) -> bool:
        """Two consecutive transactions changing the same row (same second / clock step)."""
        b.user = user
        if first:
            cands = self._orders(b, ("new", "paid"))
            self.pair_target = ("orders", self.rng.choice(cands)) if cands else \
                ("customers", self.rng.choice(b.keys("customers")))
        table, k = self.pair_target
        if table == "orders":
            b.update("orders", [(k, {"status": NEXT_STATUS[b.work["orders"][k]["status"]]})])
        else:
            tier = b.work["customers"][k]["tier"]
            b.update("customers", [(k, {"tier": TIERS[(TIERS.index(tier) + 1) % len(TIERS)]})])
        return True

    def _k_edit(self, b: Builder, variant: str | None = None) -> bool:
        rng = self.rng
        variant = variant or rng.choice(["qty", "qty", "add_remove", "replace", "renumber"])
        cands = self._orders(b, ("new",), min_items=2 if variant == "renumber" else 1)
        if not cands:
            return False
        oid = rng.choice(cands)[0]
        b.user = rng.choice(["alice", "bob"])
        items = b.items_of(oid)
        in_order = [it["product_id"] for it in items]
        stocked = [k for k in b.keys("products") if b.work["products"][k]["stock"] >= 3
                   and k[0] not in in_order]
        if variant == "qty":
            it = rng.choice(items)
            pk = (it["product_id"],)
            if b.work["products"][pk]["stock"] >= 1:
                dq = 1
            elif it["qty"] > 1:
                dq = -1
            else:
                return False
            b.update("order_items", [(key_of("order_items", it), {"qty": it["qty"] + dq})])
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - dq})])
        elif variant == "add_remove":  # INSERT then DELETE of the same line: nothing
            if not stocked:
                return False
            p = b.work["products"][rng.choice(stocked)]
            line = max(it["line_no"] for it in items) + 1
            b.insert("order_items", [b.row("order_items", order_id=oid, line_no=line,
                                           product_id=p["product_id"], qty=1, price=p["price"])])
            b.delete("order_items", [(oid, line)])
            it = items[0]
            pk = (it["product_id"],)
            if b.work["products"][pk]["stock"] < 1:
                return False
            b.update("order_items", [(key_of("order_items", it), {"qty": it["qty"] + 1})])
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] - 1})])
        elif variant == "replace":  # DELETE then INSERT of the same line: UPDATE
            if not stocked:
                return False
            it = rng.choice(items)
            new_p = b.work["products"][rng.choice(stocked)]
            old_pk = (it["product_id"],)
            b.delete("order_items", [key_of("order_items", it)])
            b.insert("order_items", [b.row("order_items", order_id=oid, line_no=it["line_no"],
                                           product_id=new_p["product_id"], qty=it["qty"],
                                           price=new_p["price"])])
            b.update("products", [(old_pk, {"stock": b.work["products"][old_pk]["stock"] + it["qty"]})])
            new_pk = (new_p["product_id"],)
            b.update("products", [(new_pk, {"stock": b.work["products"][new_pk]["stock"] - it["qty"]})])
        elif variant == "renumber":  # drop line 1, renumber the others: key-changing updates
            first = items[0]
            b.delete("order_items", [key_of("order_items", first)])
            b.update("order_items", [((oid, it["line_no"]), {"line_no": it["line_no"] - 1})
                                     for it in items[1:]])
            pk = (first["product_id"],)
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + first["qty"]})])
        b.set_total(oid)
        return True

    def _cancel_with_restock(self, b: Builder, k: tuple) -> None:
        b.update("orders", [(k, {"status": "cancelled"})])
        for it in b.items_of(k[0]):
            pk = (it["product_id"],)
            if pk in b.work["products"]:
                b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + it["qty"]})])

    def _k_cancel(self, b: Builder) -> bool:
        cands = self._orders(b, ("new", "paid"))
        if not cands:
            return False
        b.user = self.rng.choice(["carol", "carol", "alice"])
        self._cancel_with_restock(b, self.rng.choice(cands))
        return True

    def _k_scheduler(self, b: Builder) -> bool:
        """Event scheduler job: cancel stale new orders (runs on a thread with no session)."""
        cands = self._orders(b, ("new",))
        if not cands:
            return False
        b.user = SCHEDULER
        b.no_rollback = True
        for k in cands[:3]:
            self._cancel_with_restock(b, k)
        return True

    def _k_customer_update(self, b: Builder, force_null: bool = False) -> bool:
        rng = self.rng
        custs = [k for k in b.keys("customers")
                 if not force_null or b.work["customers"][k]["city"] is not None]
        if not custs:
            return False
        k = rng.choice(custs)
        cur = b.work["customers"][k]
        b.user = "carol"
        changes: dict = {}
        if force_null:
            changes["city"] = None  # explicit NULL
            changes["tier"] = TIERS[(TIERS.index(cur["tier"]) + 1) % len(TIERS)] \
                if cur["tier"] in TIERS else "bronze"
        else:
            for col in rng.sample(["email", "city", "tier"], rng.choice([1, 1, 2])):
                if col == "email":
                    changes["email"] = self._email(cur["name"])
                    if self.has_phone and rng.random() < 0.5:
                        changes["phone"] = self._phone()
                elif col == "city":
                    changes["city"] = None if rng.random() < 0.2 else rng.choice(CITIES)
                else:
                    changes["tier"] = rng.choice(TIERS)
        changes = {c: v for c, v in changes.items() if cur.get(c) != v}
        if not [c for c in changes if c != "phone"]:  # the shadow source has no phone column
            return False
        b.update("customers", [(k, changes)])
        return True

    def _k_signup(self, b: Builder) -> bool:
        rng = self.rng
        b.user = rng.choice(["alice", "bob"])
        cid = self.next_ids["customers"]
        self.next_ids["customers"] += 1
        name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
        values = dict(customer_id=cid, name=name, email=self._email(name),
                      city=rng.choice(CITIES + [None]), tier="bronze")
        if self.has_phone:
            values["phone"] = self._phone() if rng.random() < 0.6 else None
        b.insert("customers", [b.row("customers", **values)])
        r = rng.random()
        if r < 0.3:  # INSERT then UPDATE
            b.update("customers", [((cid,), {"tier": "silver"})])
        elif r < 0.4:  # INSERT then DELETE (duplicate sign-up removed at once)
            b.delete("customers", [(cid,)])
        return True

    def _k_etl(self, b: Builder) -> bool:
        rng = self.rng
        b.user = "etl"
        prods = b.keys("products")
        changes = []
        for pk in sorted(rng.sample(prods, min(len(prods), rng.randint(2, 5)))):
            price = b.work["products"][pk]["price"]
            new = money(price * Decimal(rng.choice([90, 95, 105, 110, 115])) / 100)
            if new != price:
                changes.append((pk, {"price": new}))
        if changes:
            b.update("products", changes)  # one statement, one multi-row event
        low = [pk for pk in prods if b.work["products"][pk]["stock"] < 60]
        if low and rng.random() < 0.6:
            b.update("products", [(pk, {"stock": b.work["products"][pk]["stock"] + 100}) for pk in low])
        if rng.random() < 0.25:
            pid = self.next_ids["products"]
            self.next_ids["products"] += 1
            b.insert("products", [b.row("products", product_id=pid, sku=f"SKU-{1000 + pid}",
                                        name=f"Seasonal Blend #{pid}",
                                        price=money(Decimal(rng.randint(500, 3000)) / 100),
                                        stock=rng.randint(20, 80))])
            if rng.random() < 0.5:  # INSERT then UPDATE
                b.update("products", [((pid,), {"price": Decimal("9.99")})])
        if rng.random() < 0.15:
            used = {it["product_id"] for it in b.work["order_items"].values()}
            unused = [pk for pk in b.keys("products") if pk[0] not in used]
            if unused:
                b.delete("products", [rng.choice(unused)])
        return bool(b.ops)

    def _k_purge(self, b: Builder, update_first: bool | None = None) -> bool:
        cands = self._orders(b, ("cancelled",)) or (self._orders(b, ("delivered",)) if update_first else [])
        if not cands:
            return False
        b.user = "dave"
        k = self.rng.choice(cands)
        if update_first is None:
            update_first = self.rng.random() < 0.5
        if update_first:  # UPDATE then DELETE
            b.update("orders", [(k, {"status": "archived"})])
        items = [key_of("order_items", it) for it in b.items_of(k[0])]
        if items:
            b.delete("order_items", items)
        b.delete("orders", [k])
        return True

    def _k_renumber(self, b: Builder) -> bool:
        """Admin moves a customer into the 1000+ id range: key-changing update + its orders."""
        with_orders = sorted({r["customer_id"] for r in b.work["orders"].values()})
        cands = [c for c in with_orders if c < 1000 and (c + 1000,) not in b.work["customers"]
                 and (c,) in b.work["customers"]]
        if not cands:
            return False
        b.user = "dave"
        cid = self.rng.choice(cands)
        b.update("customers", [((cid,), {"customer_id": cid + 1000})])
        b.update("orders", [(k, {"customer_id": cid + 1000}) for k in b.keys("orders")
                            if b.work["orders"][k]["customer_id"] == cid])
        return True

    def _k_delete_customer(self, b: Builder, user: str | None = None) -> bool:
        with_orders = {r["customer_id"] for r in b.work["orders"].values()}
        cands = [k for k in b.keys("customers") if k[0] not in with_orders]
        if not cands:
            return False
        b.user = user or self.rng.choice(["carol", "dave"])
        k = self.rng.choice(cands)
        if b.user == "carol":  # UPDATE then DELETE
            b.update("customers", [(k, {"tier": "closed"})])
        b.delete("customers", [k])
        return True

    def _k_o42_support(self, b: Builder) -> bool:
        b.user = "carol"
        k = (ORDER_42,)
        b.update("orders", [(k, {"status": "on_hold"})])
        ck = (b.work["orders"][k]["customer_id"],)
        tier = b.work["customers"][ck]["tier"]
        b.update("customers", [(ck, {"tier": "platinum" if tier != "platinum" else "gold"})])
        return True

    def _k_o42_admin(self, b: Builder) -> bool:
        b.user = "dave"
        first = b.items_of(ORDER_42)[0]
        b.update("order_items", [(key_of("order_items", first),
                                  {"price": money(first["price"] * Decimal("0.9"))})])
        b.update("orders", [((ORDER_42,), {"status": "paid", "total": b.order_total(ORDER_42)})])
        return True

    def _k_o42_ship(self, b: Builder) -> bool:
        b.user = "bob"
        b.update("orders", [((ORDER_42,), {"status": "shipped"})])
        return True
