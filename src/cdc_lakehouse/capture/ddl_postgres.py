"""PostgreSQL shadow capture DDL (the "Capture Transaction Details" pattern).

One generic PL/pgSQL trigger function serves every captured table: it looks the table up in a
registry (key columns, shadow table), so no name of a source table or column is ever spliced
into a function body. Per table the DDL only creates the shadow table, a registry row and the
trigger, with every name quoted by :mod:`sqlquote`.

Transaction id: ``pg_current_xact_id()``. End time: every operation sets ``end_ts`` to its own
time, and a deferred constraint trigger on the transaction table overwrites it with the clock at
COMMIT (deferred triggers run while the transaction commits), so ``end_ts`` is the commit time
unless a session forces deferred triggers early with ``SET CONSTRAINTS ALL IMMEDIATE``.
A TRUNCATE fires a statement trigger on the same function: one change row of op ``T`` with key
``{}`` (every row of the table goes; silver/truncates.py). An ``ALTER TABLE`` of a captured table
fires an event trigger (a superuser's): one change row of op ``A``, key ``{}``, values
``{"statement": current_query()}`` (silver/schema_changes.py); a DROP TABLE of one fires
another (``sql_drop``): the same row with its DROP TABLE statement, which marks the replica
dropped in ``gold.data_quality``.
User and role: ``session_user`` and the session's ``SET ROLE`` (``current_setting('role')``,
null when no role is set). The function runs as its owner (SECURITY DEFINER, fixed
search_path), so writers need no privilege on the capture schema and cannot forge its rows;
``current_role`` would name the owner there, which is why the role comes from the setting.
"""

from __future__ import annotations

from .sqlquote import CAPTURE_SCHEMA, TableName, pg_ident, pg_literal, pg_text_array

S = pg_ident(CAPTURE_SCHEMA)

_COMMON = f"""\
CREATE SCHEMA IF NOT EXISTS {S};
REVOKE ALL ON SCHEMA {S} FROM PUBLIC;

CREATE TABLE IF NOT EXISTS {S}._transactions (
    txn_id      xid8 PRIMARY KEY,
    end_ts      timestamptz NOT NULL,
    db_user     text NOT NULL,
    db_role     text,
    client      text,
    application text,
    n_ops       bigint NOT NULL
);

CREATE TABLE IF NOT EXISTS {S}._tables (
    relid         oid PRIMARY KEY,
    source_schema text NOT NULL,
    source_table  text NOT NULL,
    shadow_table  text NOT NULL UNIQUE,
    key_columns   text[] NOT NULL
        CONSTRAINT "captured table needs a primary key or --key" CHECK (cardinality(key_columns) > 0),
    UNIQUE (source_schema, source_table)
);

CREATE OR REPLACE FUNCTION {S}._stamp_commit() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    UPDATE {S}._transactions SET end_ts = clock_timestamp() WHERE txn_id = NEW.txn_id;
    RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS stamp_commit ON {S}._transactions;
CREATE CONSTRAINT TRIGGER stamp_commit AFTER INSERT ON {S}._transactions
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {S}._stamp_commit();

-- One operation: counted in its transaction's row (the count is its op_seq), then written to
-- the shadow table.
CREATE OR REPLACE FUNCTION {S}._record_op(shadow text, op text, k json, old_k json, vals json) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    txn    xid8 := pg_current_xact_id();
    op_at  timestamptz := clock_timestamp();
    seq    bigint;
BEGIN
    INSERT INTO {S}._transactions AS t
           (txn_id, end_ts, db_user, db_role, client, application, n_ops)
    VALUES (txn, op_at, session_user, nullif(current_setting('role'), 'none'),
            host(inet_client_addr()), nullif(current_setting('application_name'), ''), 1)
    ON CONFLICT (txn_id) DO UPDATE SET n_ops = t.n_ops + 1, end_ts = EXCLUDED.end_ts
    RETURNING t.n_ops INTO seq;

    EXECUTE format('INSERT INTO {CAPTURE_SCHEMA}.%I (txn_id, op_ts, op_seq, op, key, old_key, "values") '
                   'VALUES ($1, $2, $3, $4, $5, $6, $7)', shadow)
      USING txn, op_at, seq, op, k, old_k, vals;
END
$fn$;
REVOKE ALL ON FUNCTION {S}._record_op(text, text, json, json, json) FROM PUBLIC;

CREATE OR REPLACE FUNCTION {S}._record_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    reg    {S}._tables;
    new_j  json;
    old_j  json;
    k      json;
    old_k  json;
    vals   json;
BEGIN
    SELECT * INTO reg FROM {S}._tables WHERE relid = TG_RELID;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cdc_capture: % is not registered', TG_RELID::regclass;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN new_j := row_to_json(NEW); END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN old_j := row_to_json(OLD); END IF;

    IF TG_OP = 'TRUNCATE' THEN
        k := '{{}}'::json;  -- the statement trigger: the whole table, no row
    ELSE
        SELECT json_object_agg(c.name, coalesce(new_j, old_j) -> c.name ORDER BY c.pos)
          INTO k FROM unnest(reg.key_columns) WITH ORDINALITY AS c(name, pos);
    END IF;
    IF TG_OP = 'INSERT' THEN
        vals := new_j;
    ELSIF TG_OP = 'UPDATE' THEN
        SELECT json_object_agg(n.key, n.value ORDER BY n.pos) INTO vals
          FROM json_each(new_j) WITH ORDINALITY AS n(key, value, pos)
         WHERE (old_j -> n.key)::text IS DISTINCT FROM n.value::text;
        IF vals IS NULL THEN
            RETURN NULL;  -- nothing changed: nothing to replicate
        END IF;
        SELECT json_object_agg(c.name, old_j -> c.name ORDER BY c.pos)
          INTO old_k FROM unnest(reg.key_columns) WITH ORDINALITY AS c(name, pos);
        IF old_k::text = k::text THEN old_k := NULL; END IF;
    END IF;

    PERFORM {S}._record_op(reg.shadow_table, left(TG_OP, 1), k, old_k, vals);
    RETURN NULL;
END
$fn$;

CREATE OR REPLACE FUNCTION {S}._record_ddl() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    cmd    record;
    reg    {S}._tables;
BEGIN
    FOR cmd IN SELECT DISTINCT objid FROM pg_event_trigger_ddl_commands()
                WHERE command_tag = 'ALTER TABLE' AND classid = 'pg_class'::regclass LOOP
        SELECT * INTO reg FROM {S}._tables WHERE relid = cmd.objid;
        CONTINUE WHEN NOT FOUND;
        PERFORM {S}._record_op(reg.shadow_table, 'A', '{{}}'::json, NULL,
                               json_build_object('statement', current_query()));
    END LOOP;
END
$fn$;

-- A dropped captured table: its DROP TABLE statement (a DROP SCHEMA ... CASCADE or DROP OWNED
-- that takes it along is recorded as a DROP TABLE of it, naming the statement). The registry row
-- stays, so the export still reads the shadow table's last rows and this one.
CREATE OR REPLACE FUNCTION {S}._record_drop() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    obj    record;
    reg    {S}._tables;
BEGIN
    FOR obj IN SELECT objid, original FROM pg_event_trigger_dropped_objects()
                WHERE classid = 'pg_class'::regclass AND objsubid = 0 AND object_type = 'table' LOOP
        SELECT * INTO reg FROM {S}._tables WHERE relid = obj.objid;
        CONTINUE WHEN NOT FOUND;
        PERFORM {S}._record_op(reg.shadow_table, 'A', '{{}}'::json, NULL, json_build_object('statement',
            CASE WHEN TG_TAG = 'DROP TABLE' AND obj.original THEN current_query()
                 ELSE format('DROP TABLE %I.%I /* by %s */', reg.source_schema, reg.source_table, current_query())
            END));
    END LOOP;
END
$fn$;

-- Event triggers need a superuser: without one, ALTER TABLE and DROP TABLE are not captured
-- (docs/capture.md).
DO $do$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        DROP EVENT TRIGGER IF EXISTS cdc_capture_ddl;
        CREATE EVENT TRIGGER cdc_capture_ddl ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
            EXECUTE FUNCTION {S}._record_ddl();
        DROP EVENT TRIGGER IF EXISTS cdc_capture_drop;
        CREATE EVENT TRIGGER cdc_capture_drop ON sql_drop EXECUTE FUNCTION {S}._record_drop();
    ELSE
        RAISE WARNING 'cdc_capture: % is no superuser: ALTER TABLE and DROP TABLE of captured tables are not captured', current_user;
    END IF;
END
$do$;
"""


def common_ddl() -> str:
    """Schema, transaction table, registry and the two trigger functions (idempotent)."""
    return _COMMON


def table_ddl(table: TableName, keys: list[str] | None = None) -> str:
    """Shadow table, registry row and trigger for one table (idempotent).

    Without ``keys`` the registry takes the table's primary key from the catalog when the DDL
    runs; a table with neither fails with the registry's check constraint.
    """
    src = f"{pg_ident(table.schema)}.{pg_ident(table.table)}"
    shadow = f"{S}.{pg_ident(table.shadow)}"
    txn_index = pg_ident(f"{table.shadow}_txn")  # in the shadow table's schema
    regclass = f"{pg_literal(src)}::regclass"
    pk = (f"(SELECT array_agg(a.attname::text ORDER BY k.ord) FROM pg_index i "
          f"CROSS JOIN unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord) "
          f"JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
          f"WHERE i.indrelid = {regclass} AND i.indisprimary)")
    key_expr = pg_text_array(keys) if keys else f"coalesce({pk}, ARRAY[]::text[])"
    return f"""\
CREATE TABLE IF NOT EXISTS {shadow} (
    id       bigserial PRIMARY KEY,
    txn_id   xid8 NOT NULL,
    op_ts    timestamptz NOT NULL,
    op_seq   bigint NOT NULL,
    op       char(1) NOT NULL,
    key      json NOT NULL,
    old_key  json,
    "values" json
);
-- The exporter looks up the rest of a batch's transactions by txn_id past an id.
CREATE INDEX IF NOT EXISTS {txn_index} ON {shadow} (txn_id, id);

-- A table of this name dropped and created again: the new one takes over the registry row's
-- name (and shadow table, whose rows are still to be exported).
DELETE FROM {S}._tables WHERE source_schema = {pg_literal(table.schema)}
    AND source_table = {pg_literal(table.table)} AND relid <> {regclass};
INSERT INTO {S}._tables (relid, source_schema, source_table, shadow_table, key_columns)
SELECT {regclass}, {pg_literal(table.schema)}, {pg_literal(table.table)},
       {pg_literal(table.shadow)}, {key_expr}
ON CONFLICT (relid) DO UPDATE SET key_columns = EXCLUDED.key_columns,
                                  shadow_table = EXCLUDED.shadow_table;

DROP TRIGGER IF EXISTS cdc_capture ON {src};
CREATE TRIGGER cdc_capture AFTER INSERT OR UPDATE OR DELETE ON {src}
    FOR EACH ROW EXECUTE FUNCTION {S}._record_change();
DROP TRIGGER IF EXISTS cdc_capture_truncate ON {src};
CREATE TRIGGER cdc_capture_truncate AFTER TRUNCATE ON {src}
    FOR EACH STATEMENT EXECUTE FUNCTION {S}._record_change();
"""


def shadow_ddl(table: TableName, keys: list[str] | None = None) -> str:
    return common_ddl() + "\n" + table_ddl(table, keys)
