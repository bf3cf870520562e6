#!/bin/bash
grep -cx copper /app/queue.log > /app/value.txt
