-- shop.sql: the producing service's own table in the examples (a shop
-- that announces each order). Yours is whatever your business writes; the
-- outbox only needs `outboxctl migrate --schema outbox` beside it.
CREATE TABLE IF NOT EXISTS shop_orders (
    id       bigint  PRIMARY KEY,
    customer text    NOT NULL,
    total    numeric NOT NULL
);
