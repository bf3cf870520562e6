#!/bin/bash
sed -i 's/localhost/db.internal/g' /app/app.conf
