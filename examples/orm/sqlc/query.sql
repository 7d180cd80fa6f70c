-- name: CreateOrder :exec
INSERT INTO orders (id, cents) VALUES ($1, $2);

-- name: CountOrders :one
SELECT count(*) FROM orders;
