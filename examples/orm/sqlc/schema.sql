CREATE TABLE orders (
    id text PRIMARY KEY,
    cents bigint NOT NULL
);
