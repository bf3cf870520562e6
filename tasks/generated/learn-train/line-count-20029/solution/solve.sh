#!/bin/bash
wc -l < /app/inventory.log > /app/answer.txt
